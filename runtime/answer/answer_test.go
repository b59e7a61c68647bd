package answer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/queue"
	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/token"
)

// The one mapping from dispatch failures to what a client sees.
func TestFailureResponse(t *testing.T) {
	w := engine.New(plan.Engine{ID: "E1", URL: "http://10.9.9.9:1"})
	secret := "http://10.9.9.9:1 Traceback secret"
	for _, tc := range []struct {
		err    *dispatch.Error
		status int
		code   string
		msg    string
	}{
		{&dispatch.Error{Kind: dispatch.Unreachable, Stage: plan.RolePlain, Worker: w, Detail: secret}, 502, CodeEngineError, "engine E1 failed: connection error"},
		{&dispatch.Error{Kind: dispatch.BreakerOpen, Stage: plan.RolePlain, Worker: w}, 503, CodeEngineUnavailable, "circuit breaker open"},
		{&dispatch.Error{Kind: dispatch.Timeout, Stage: plan.RoleDecode, Worker: w, Phase: dispatch.PhaseFirstByte, After: time.Second}, 504, CodeEngineTimeout, "decode engine E1 timed out (first_byte, 1s)"},
		{&dispatch.Error{Kind: dispatch.Timeout, Stage: plan.RolePrefill, Worker: w, Phase: dispatch.PhasePrefillStatus, After: time.Second}, 504, CodePrefillError, "prefill engine E1 timed out"},
		{&dispatch.Error{Kind: dispatch.BadStatus, Stage: plan.RolePlain, Worker: w, Status: 503, Detail: secret}, 502, CodeEngineError, "engine E1 answered 503 Service Unavailable"},
		{&dispatch.Error{Kind: dispatch.BadStatus, Stage: plan.RolePrefill, Worker: w, Status: 500, Detail: secret}, 502, CodePrefillError, "prefill engine E1 answered 500"},
		{&dispatch.Error{Kind: dispatch.BadStatus, Stage: plan.RolePrefill, Worker: w, Status: 422, EngineMsg: "bad field"}, 422, CodeEngineRejected, "answered 422 Unprocessable Entity: bad field"},
		{&dispatch.Error{Kind: dispatch.BadStatus, Stage: plan.RolePlain, Worker: w, Status: 429}, 429, CodeEngineRejected, "answered 429"},
		{&dispatch.Error{Kind: dispatch.Malformed, Stage: plan.RolePlain, Worker: w, Detail: secret}, 502, CodeEngineError, "malformed answer"},
		{&dispatch.Error{Kind: dispatch.ClientGone, Stage: plan.RolePlain, Worker: w}, StatusClientClosed, CodeClientClosed, "client closed"},
		{&dispatch.Error{Kind: dispatch.Shutdown, Stage: plan.RolePlain, Worker: w}, 503, CodeDraining, "shutting down"},
	} {
		status, code, msg := StatusOf(tc.err)
		if status != tc.status || code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%v: got %d %s %q, want %d %s containing %q", tc.err, status, code, msg, tc.status, tc.code, tc.msg)
		}
		if strings.Contains(msg, "10.9.9.9") || strings.Contains(msg, "Traceback") {
			t.Errorf("%v: the client message leaks details: %q", tc.err, msg)
		}
	}
}

// Selection failures are the request's to fix (400), the fleet's (503) or the router's
// (500), and keep their codes.
func TestSelectionStatus(t *testing.T) {
	for _, tc := range []struct {
		reason bucket.Reason
		status int
	}{
		{bucket.NoMatchingBucket, 400}, {bucket.TokenCountOverflow, 400}, {bucket.InvalidTokenCount, 400},
		{bucket.AdmissionRejected, 503}, {bucket.NoCandidates, 503},
		{bucket.InvalidSignal, 500}, {bucket.InvalidConfiguration, 500}, {bucket.OutsideCandidates, 500}, {bucket.Internal, 500},
	} {
		err := &bucket.Error{Reason: tc.reason, Stage: plan.RoleDecode}
		status, code, _ := StatusOf(fmt.Errorf("routing: %w", err))
		if status != tc.status || code != err.Code() {
			t.Errorf("%s: got %d %s, want %d %s", tc.reason, status, code, tc.status, err.Code())
		}
	}
}

// A tokenization's failures, as request.Tokenizing types them: over the budget a 413
// naming the setting, a request whose client left 499, one the router's hard stop ended
// 503, and a failure of the text itself a 400 saying what failed.
func TestTokenizeFailures(t *testing.T) {
	live := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	stopped, stop := context.WithCancelCause(context.Background())
	stop(dispatch.ErrHardStop)
	for _, tc := range []struct {
		name   string
		r      *http.Request
		err    error
		status int
		code   string
		msg    string
	}{
		{"over the budget", live, &token.TooLargeError{Limit: 1024, Size: 2048}, http.StatusRequestEntityTooLarge, CodePromptTooLarge, "2048 bytes, over the limit of 1024 bytes per request: shorten the prompt, or raise limits.max_tokenize_bytes"},
		{"client left", live.WithContext(gone), context.Canceled, StatusClientClosed, CodeClientClosed, "client closed the request"},
		{"hard stop", live.WithContext(stopped), context.Canceled, http.StatusServiceUnavailable, CodeDraining, "shutting down"},
		{"template error", live, errors.New("undefined variable"), http.StatusBadRequest, CodeInvalidRequest, "rendering the chat template: undefined variable"},
	} {
		err := request.Tokenizing(tc.r, tc.err, "m", "rendering the chat template")
		status, code, msg := StatusOf(err)
		if status != tc.status || code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: got %d %s %q, want %d %s containing %q", tc.name, status, code, msg, tc.status, tc.code, tc.msg)
		}
		if err.Model != "m" {
			t.Errorf("%s: the error names model %q, want m (the decision log reads it)", tc.name, err.Model)
		}
	}
}

// The queue's refusals (SGLang's router: 429 for a full queue and the rate limit, 408
// for a timed-out wait), with Retry-After in whole seconds, at least 1 and at most a
// minute.
func TestQueueResponse(t *testing.T) {
	for _, tc := range []struct {
		err        *queue.Error
		status     int
		code       string
		retryAfter string
	}{
		{&queue.Error{Reason: queue.Full, Model: "m", Size: 5, RetryAfter: time.Second}, 429, CodeQueueFull, "1"},
		{&queue.Error{Reason: queue.Timeout, Model: "m", MaxWait: time.Minute}, 408, CodeQueueTimeout, ""},
		{&queue.Error{Reason: queue.RateLimited, Model: "m", Rate: 4, RetryAfter: 250 * time.Millisecond}, 429, CodeRateLimited, "1"},
		{&queue.Error{Reason: queue.RateLimited, Model: "m", RetryAfter: 2500 * time.Millisecond}, 429, CodeRateLimited, "3"},
		{&queue.Error{Reason: queue.RateLimited, Model: "m", RetryAfter: 1 << 62}, 429, CodeRateLimited, "60"},
		{&queue.Error{Reason: queue.OverCapacity, Limit: 8, RetryAfter: time.Second}, 503, CodeOverCapacity, "1"},
		{&queue.Error{Reason: queue.ClientGone, Cause: context.Canceled}, StatusClientClosed, CodeClientClosed, ""},
		{&queue.Error{Reason: queue.ClientGone, Cause: dispatch.ErrHardStop}, 503, CodeDraining, ""},
	} {
		rec := httptest.NewRecorder()
		WriteErr(rec, fmt.Errorf("routing: %w", tc.err))
		if rec.Code != tc.status || rec.Header().Get("X-Router-Error-Code") != tc.code || rec.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%s: %d %s Retry-After %q, want %d %s %q", tc.err.Reason, rec.Code, rec.Header().Get("X-Router-Error-Code"),
				rec.Header().Get("Retry-After"), tc.status, tc.code, tc.retryAfter)
		}
	}
}
