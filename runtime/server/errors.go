package server

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error codes of failures decided by the handler itself. Selection failures carry the
// codes of package bucket.
const (
	codeBodyTooLarge    = "request_too_large"
	codeInvalidJSON     = "invalid_json"
	codeInvalidRequest  = "invalid_request"
	codeModelNotFound   = "model_not_found"
	codeEngineError     = "engine_error"
	codeEngineRejected  = "engine_rejected"
	codeNotFound        = "not_found"
	codeMethod          = "method_not_allowed"
	codePrefillError    = "prefill_error"
	codeUnauthorized    = "unauthorized"
	codeDraining        = "shutting_down"
	codeNoTokenizer     = "no_tokenizer"
	codeNoHealthyEngine = "no_healthy_engine"
)

// httpError is a failure answered with an OpenAI-shaped error body.
type httpError struct {
	status int
	code   string
	msg    string
	// model is the requested model when the request named one.
	model string
}

func (e *httpError) Error() string { return e.msg }

// badRequest is a 400 invalid_request whose message names the field to fix.
func badRequest(format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: codeInvalidRequest, msg: fmt.Sprintf(format, args...)}
}

// writeHTTPError answers with e.
func writeHTTPError(w http.ResponseWriter, e *httpError) { writeError(w, e.status, e.code, e.msg) }

// writeError answers with {"error": {"message", "type", "code"}} and the machine-readable
// code in x-router-error-code, so scripts need not parse the body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Router-Error-Code", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody(status, code, msg))
}

// errorBody is an OpenAI-shaped error.
func errorBody(status int, code, msg string) map[string]any {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}}
}
