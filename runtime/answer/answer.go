// Package answer is the HTTP edge's one mapping from the router's typed errors to what a
// client gets: the status, the machine-readable code (also sent as x-router-error-code)
// and the message of an OpenAI-shaped error body. Request reading (package request),
// selection (bucket) and dispatch (dispatch) type their failures without knowing HTTP;
// this package alone answers them, for serving and for explanations alike.
package answer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/queue"
	"github.com/routerkit/router/runtime/request"
)

// Error codes of failures decided by the router itself. Selection failures carry the
// codes of package bucket (bucket.Error.Code).
const (
	CodeBodyTooLarge    = "request_too_large"
	CodeInvalidJSON     = "invalid_json"
	CodeInvalidRequest  = "invalid_request"
	CodeModelNotFound   = "model_not_found"
	CodeEngineError     = "engine_error"
	CodeEngineRejected  = "engine_rejected"
	CodeNotFound        = "not_found"
	CodeMethod          = "method_not_allowed"
	CodePrefillError    = "prefill_error"
	CodeUnauthorized    = "unauthorized"
	CodeForbidden       = "forbidden"
	CodeDraining        = "shutting_down"
	CodeNoTokenizer     = "no_tokenizer"
	CodeNoHealthyEngine = "no_healthy_engine"
	// CodePromptTooLarge answers a request whose text to tokenize is over
	// limits.max_tokenize_bytes.
	CodePromptTooLarge = "prompt_too_large"
	CodeInvalidTarget  = "invalid_slo_target"
	// Queue codes (runtime/queue): a full queue and the rate limit without a queue are
	// 429 with Retry-After, a wait past queue.timeout_ms 408, as SGLang's router answers.
	CodeQueueFull    = "queue_full"
	CodeQueueTimeout = "queue_timeout"
	CodeRateLimited  = "rate_limited"
)

// Error is a failure the HTTP edge decided itself (a body too large, a body read
// timeout), answered as it says.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// StatusOf is the one place an error becomes what a client sees: the status, the code
// and the message of the answer. Request, selection and dispatch failures are typed by
// the packages that find them, none of which knows HTTP statuses.
func StatusOf(err error) (status int, code, msg string) {
	var (
		he *Error
		re *request.Error
		be *bucket.Error
		de *dispatch.Error
		qe *queue.Error
	)
	switch {
	case errors.As(err, &he):
		return he.Status, he.Code, he.Msg
	case errors.As(err, &re):
		switch re.Kind {
		case request.InvalidJSON:
			return http.StatusBadRequest, CodeInvalidJSON, re.Msg
		case request.UnknownModel:
			return http.StatusNotFound, CodeModelNotFound, re.Msg
		case request.NoTokenizer:
			return http.StatusNotImplemented, CodeNoTokenizer, re.Msg
		case request.InvalidTarget:
			return http.StatusBadRequest, CodeInvalidTarget, re.Msg
		case request.Internal:
			return http.StatusInternalServerError, CodeInternal, re.Msg
		case request.TooLarge:
			return http.StatusRequestEntityTooLarge, CodePromptTooLarge, re.Msg
		case request.Ended:
			if errors.Is(re.Cause, dispatch.ErrHardStop) {
				return http.StatusServiceUnavailable, CodeDraining, "the router is shutting down"
			}
			return StatusClientClosed, CodeClientClosed, "client closed the request"
		}
		return http.StatusBadRequest, CodeInvalidRequest, re.Msg
	case errors.As(err, &be):
		return selectionStatus(be.Reason), be.Code(), be.Error()
	case errors.As(err, &de):
		return failureResponse(de)
	case errors.As(err, &qe):
		return queueResponse(qe)
	}
	return http.StatusInternalServerError, CodeInternal, err.Error()
}

// Body is an OpenAI-shaped error.
func Body(status int, code, msg string) map[string]any {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}}
}

// Dispatch error codes.
const (
	CodeEngineTimeout     = "engine_timeout"
	CodeEngineUnavailable = "engine_unavailable"
	CodeClientClosed      = "client_closed"
	CodeOverCapacity      = "over_capacity"
	CodeBodyTimeout       = "body_read_timeout"
)

// failureResponse is the one place a dispatch failure becomes what the client sees:
// status, code and message. Messages name the engine by its configured id, never its URL,
// and carry no engine body except a 4xx's own message.
func failureResponse(de *dispatch.Error) (status int, code, msg string) {
	failed := CodeEngineError
	if de.Stage == plan.RolePrefill {
		failed = CodePrefillError
	}
	who := "engine " + de.EngineID()
	if de.Stage != plan.RolePlain {
		who = string(de.Stage) + " " + who
	}
	switch de.Kind {
	case dispatch.BreakerOpen:
		return http.StatusServiceUnavailable, CodeEngineUnavailable, who + " is failing (circuit breaker open); no other engine was available"
	case dispatch.Timeout:
		code := CodeEngineTimeout
		if de.Stage == plan.RolePrefill {
			code = CodePrefillError
		}
		return http.StatusGatewayTimeout, code, fmt.Sprintf("%s timed out (%s, %v)", who, de.Phase, de.After)
	case dispatch.BadStatus:
		m := fmt.Sprintf("%s answered %d %s", who, de.Status, http.StatusText(de.Status))
		switch {
		case de.Rejection():
			if de.EngineMsg != "" {
				m += ": " + de.EngineMsg
			}
			return de.Status, CodeEngineRejected, m
		case de.Status == http.StatusTooManyRequests:
			// Passed on as 429, so clients back off, but counted against the engine's
			// breaker: an engine shedding load must stop attracting traffic.
			return de.Status, CodeEngineRejected, m
		}
		return http.StatusBadGateway, failed, m
	case dispatch.Malformed:
		return http.StatusBadGateway, failed, who + " failed: malformed answer"
	case dispatch.ClientGone:
		return StatusClientClosed, CodeClientClosed, "client closed the request"
	case dispatch.Shutdown:
		return http.StatusServiceUnavailable, CodeDraining, "the router is shutting down"
	}
	return http.StatusBadGateway, failed, who + " failed: connection error"
}

// queueResponse is what a client sees of a request the queue did not let through.
func queueResponse(e *queue.Error) (status int, code, msg string) {
	switch e.Reason {
	case queue.Full:
		return http.StatusTooManyRequests, CodeQueueFull, e.Error()
	case queue.Timeout:
		return http.StatusRequestTimeout, CodeQueueTimeout, e.Error()
	case queue.RateLimited:
		return http.StatusTooManyRequests, CodeRateLimited, e.Error()
	case queue.ClientGone:
		if errors.Is(e.Cause, dispatch.ErrHardStop) {
			return http.StatusServiceUnavailable, CodeDraining, "the router is shutting down"
		}
		return StatusClientClosed, CodeClientClosed, "client closed the request"
	}
	return http.StatusServiceUnavailable, CodeOverCapacity, e.Error()
}

// retryAfterMax caps the Retry-After advice: a rate of 0 never refills.
const retryAfterMax = time.Minute

// selectionStatus is the status of a selection failure: the request's to fix (400), the
// fleet's (503: no engine can take it now) or the router's (500).
func selectionStatus(r bucket.Reason) int {
	switch r {
	case bucket.NoMatchingBucket, bucket.TokenCountOverflow, bucket.InvalidTokenCount:
		return http.StatusBadRequest
	case bucket.AdmissionRejected, bucket.NoCandidates:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// StatusClientClosed is logged when the client went away before any response (nginx's
// convention); it is never written to a client.
const StatusClientClosed = 499

// CodeInternal is the code of a failure of the router itself.
const CodeInternal = "internal_error"

// Write answers with {"error": {"message", "type", "code"}} and the machine-readable
// code in x-router-error-code, so scripts need not parse the body.
func Write(w http.ResponseWriter, status int, code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Router-Error-Code", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Body(status, code, msg))
}

// WriteErr answers with err as StatusOf maps it, with the Retry-After advice of a
// refusal by the queue (whole seconds, at least 1).
func WriteErr(w http.ResponseWriter, err error) {
	if qe, ok := errors.AsType[*queue.Error](err); ok && qe.RetryAfter > 0 {
		secs := int64(math.Ceil(min(qe.RetryAfter, retryAfterMax).Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	}
	status, code, msg := StatusOf(err)
	Write(w, status, code, msg)
}

// JSON answers with v, indented for people reading admin answers with curl.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
