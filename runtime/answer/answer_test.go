package answer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
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
