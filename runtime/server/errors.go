package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/plan"
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
		de *dispatch.Error
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

// Dispatch error codes.
const (
	codeEngineTimeout     = "engine_timeout"
	codeEngineUnavailable = "engine_unavailable"
	codeClientClosed      = "client_closed"
	codeOverCapacity      = "over_capacity"
	codeBodyTimeout       = "body_read_timeout"
)

// failureResponse is the one place a dispatch failure becomes what the client sees:
// status, code and message. Messages name the engine by its configured id, never its URL,
// and carry no engine body except a 4xx's own message.
func failureResponse(de *dispatch.Error) (status int, code, msg string) {
	failed := codeEngineError
	if de.Stage == plan.RolePrefill {
		failed = codePrefillError
	}
	who := "engine " + de.EngineID()
	if de.Stage != plan.RolePlain {
		who = string(de.Stage) + " " + who
	}
	switch de.Kind {
	case dispatch.BreakerOpen:
		return http.StatusServiceUnavailable, codeEngineUnavailable, who + " is failing (circuit breaker open); no other engine was available"
	case dispatch.Timeout:
		code := codeEngineTimeout
		if de.Stage == plan.RolePrefill {
			code = codePrefillError
		}
		return http.StatusGatewayTimeout, code, fmt.Sprintf("%s timed out (%s, %v)", who, de.Phase, de.After)
	case dispatch.BadStatus:
		m := fmt.Sprintf("%s answered %d %s", who, de.Status, http.StatusText(de.Status))
		switch {
		case de.Rejection():
			if de.EngineMsg != "" {
				m += ": " + de.EngineMsg
			}
			return de.Status, codeEngineRejected, m
		case de.Status == http.StatusTooManyRequests:
			// Passed on as 429, so clients back off, but counted against the engine's
			// breaker: an engine shedding load must stop attracting traffic.
			return de.Status, codeEngineRejected, m
		}
		return http.StatusBadGateway, failed, m
	case dispatch.Malformed:
		return http.StatusBadGateway, failed, who + " failed: malformed answer"
	case dispatch.ClientGone:
		return statusClientClosed, codeClientClosed, "client closed the request"
	case dispatch.Shutdown:
		return http.StatusServiceUnavailable, codeDraining, "the router is shutting down"
	}
	return http.StatusBadGateway, failed, who + " failed: connection error"
}
