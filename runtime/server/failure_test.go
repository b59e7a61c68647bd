package server

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// The one mapping from dispatch failures to what a client sees.
func TestFailureResponse(t *testing.T) {
	w := engine.New(plan.Engine{ID: "E1", URL: "http://10.9.9.9:1"})
	secret := "http://10.9.9.9:1 Traceback secret"
	for _, tc := range []struct {
		err    *dispatchError
		status int
		code   string
		msg    string
	}{
		{&dispatchError{kind: failUnreachable, stage: plan.RolePlain, worker: w, detail: secret}, 502, codeEngineError, "engine E1 failed: connection error"},
		{&dispatchError{kind: failBreakerOpen, stage: plan.RolePlain, worker: w}, 503, codeEngineUnavailable, "circuit breaker open"},
		{&dispatchError{kind: failTimeout, stage: plan.RoleDecode, worker: w, phase: phaseFirstByte, after: time.Second}, 504, codeEngineTimeout, "decode engine E1 timed out (first_byte, 1s)"},
		{&dispatchError{kind: failTimeout, stage: plan.RolePrefill, worker: w, phase: phasePrefillStatus, after: time.Second}, 504, codePrefillError, "prefill engine E1 timed out"},
		{&dispatchError{kind: failStatus, stage: plan.RolePlain, worker: w, status: 503, detail: secret}, 502, codeEngineError, "engine E1 answered 503 Service Unavailable"},
		{&dispatchError{kind: failStatus, stage: plan.RolePrefill, worker: w, status: 500, detail: secret}, 502, codePrefillError, "prefill engine E1 answered 500"},
		{&dispatchError{kind: failStatus, stage: plan.RolePrefill, worker: w, status: 422, engineMsg: "bad field"}, 422, codeEngineRejected, "answered 422 Unprocessable Entity: bad field"},
		{&dispatchError{kind: failStatus, stage: plan.RolePlain, worker: w, status: 429}, 429, codeEngineRejected, "answered 429"},
		{&dispatchError{kind: failMalformed, stage: plan.RolePlain, worker: w, detail: secret}, 502, codeEngineError, "malformed answer"},
		{&dispatchError{kind: failClientGone, stage: plan.RolePlain, worker: w}, statusClientClosed, codeClientClosed, "client closed"},
		{&dispatchError{kind: failShutdown, stage: plan.RolePlain, worker: w}, 503, codeDraining, "shutting down"},
	} {
		status, code, msg := failureResponse(tc.err)
		if status != tc.status || code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%v: got %d %s %q, want %d %s containing %q", tc.err, status, code, msg, tc.status, tc.code, tc.msg)
		}
		if strings.Contains(msg, "10.9.9.9") || strings.Contains(msg, "Traceback") {
			t.Errorf("%v: the client message leaks details: %q", tc.err, msg)
		}
	}
}

func TestClassify(t *testing.T) {
	w := engine.New(plan.Engine{ID: "E1"})
	bg := context.Background()
	refused := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	timedOut := &net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Err: errors.New("connection reset")}
	for _, tc := range []struct {
		err       error
		kind      failKind
		retriable bool
	}{
		{refused, failUnreachable, true},
		{timedOut, failTimeout, true},
		{reset, failTransport, false},
	} {
		de := classify(bg, bg, tc.err, w, plan.RolePlain)
		if de.kind != tc.kind || de.retriable() != tc.retriable {
			t.Errorf("%v: kind %v retriable %v", tc.err, de.kind, de.retriable())
		}
	}
	gone, cancel := context.WithCancel(bg)
	cancel()
	if de := classify(gone, gone, reset, w, plan.RolePlain); de.kind != failClientGone {
		t.Errorf("a cancelled client is %v", de.kind)
	}
	timed, stop := context.WithCancelCause(bg)
	stop(&dispatchError{kind: failTimeout, phase: phaseTotal})
	if de := classify(timed, bg, reset, w, plan.RolePlain); de.kind != failTimeout || de.phase != phaseTotal {
		t.Errorf("a deadline cause is %v %s", de.kind, de.phase)
	}
	if (&dispatchError{kind: failUnreachable, sent: true}).retriable() {
		t.Error("a PD half that failed to connect after the other was sent is retriable")
	}
}
