package server

import (
	"encoding/json"
	"net/http"

	"github.com/routerkit/router/runtime/answer"
)

// writeErr answers with err as statusOf maps it.
func writeErr(w http.ResponseWriter, err error) {
	status, code, msg := answer.StatusOf(err)
	writeError(w, status, code, msg)
}

// writeError answers with {"error": {"message", "type", "code"}} and the machine-readable
// code in x-router-error-code, so scripts need not parse the body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Router-Error-Code", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(answer.Body(status, code, msg))
}
