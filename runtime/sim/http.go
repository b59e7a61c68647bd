package sim

import (
	"encoding/json"
	"net/http"
	"strings"
)

// apiError is SGLang's error body (its OpenAI-compatible ErrorResponse): flat, not wrapped
// in an "error" object.
type apiError struct {
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	typ := strings.ReplaceAll(http.StatusText(status), " ", "")
	if !strings.HasSuffix(typ, "Error") {
		typ += "Error"
	}
	writeJSON(w, status, apiError{Object: "error", Message: msg, Type: typ, Code: status})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An encoding error here means the client went away; there is no one left to tell.
	_ = json.NewEncoder(w).Encode(v)
}
