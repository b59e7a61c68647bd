package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/request"
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

// statusOf is the one place an error becomes what a client sees: the status, the code
// and the message of the answer. Request, selection and dispatch failures are typed by
// the packages that find them, none of which knows HTTP statuses.
func statusOf(err error) (status int, code, msg string) {
	var (
		he *httpError
		re *request.Error
		be *bucket.Error
		de *dispatchError
	)
	switch {
	case errors.As(err, &he):
		return he.status, he.code, he.msg
	case errors.As(err, &re):
		switch re.Kind {
		case request.InvalidJSON:
			return http.StatusBadRequest, codeInvalidJSON, re.Msg
		case request.UnknownModel:
			return http.StatusNotFound, codeModelNotFound, re.Msg
		case request.NoTokenizer:
			return http.StatusNotImplemented, codeNoTokenizer, re.Msg
		case request.Internal:
			return http.StatusInternalServerError, bucket.CodeInternal, re.Msg
		}
		return http.StatusBadRequest, codeInvalidRequest, re.Msg
	case errors.As(err, &be):
		return be.Status(), be.Code(), be.Error()
	case errors.As(err, &de):
		return failureResponse(de)
	}
	return http.StatusInternalServerError, bucket.CodeInternal, err.Error()
}

// writeErr answers with err as statusOf maps it.
func writeErr(w http.ResponseWriter, err error) {
	status, code, msg := statusOf(err)
	writeError(w, status, code, msg)
}

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
