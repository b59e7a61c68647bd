package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// failKind classifies a failed dispatch.
type failKind int

const (
	// failUnreachable: the connection to the engine could not be made, so the engine
	// never received the request (retriable).
	failUnreachable failKind = iota
	// failBreakerOpen: the engine's breaker refused the dispatch; nothing was sent
	// (retriable).
	failBreakerOpen
	// failTransport: the connection failed after the request was sent.
	failTransport
	// failTimeout: a dispatch deadline passed (phase says which).
	failTimeout
	// failStatus: the engine answered an error status.
	failStatus
	// failMalformed: the engine answered something that is not a usable response (a
	// redirect, a body that is not JSON, a body cut short).
	failMalformed
	// failClientGone: the client's connection ended first.
	failClientGone
	// failShutdown: the router's shutdown grace period expired.
	failShutdown
)

// Timeout phases, the label values of router_timeouts_total.
const (
	phaseConnect       = "connect"
	phaseFirstByte     = "first_byte"
	phaseStreamIdle    = "stream_idle"
	phaseTotal         = "total"
	phasePrefillStatus = "prefill_status"
	phaseBodyRead      = "body_read"
)

// dispatchError is a failed dispatch to one engine. Its Error text carries every detail
// for the logs; what the client sees is decided by failureResponse alone.
type dispatchError struct {
	kind   failKind
	stage  plan.Role
	worker *engine.Worker
	// status is the engine's answer for failStatus.
	status int
	// phase and after describe a timeout.
	phase string
	after time.Duration
	// engineMsg is the message of a 4xx answer: the engine telling the client what is
	// wrong with its request, the one piece of an engine's body a client sees.
	engineMsg string
	// detail is for the logs only: transport errors, 5xx bodies, URLs.
	detail string
	// sent: another engine already got the request (the other PD half), so even a
	// failure to reach this one is not retried.
	sent bool
}

func (e *dispatchError) engineID() string {
	if e.worker == nil {
		return "?"
	}
	return e.worker.ID()
}

func (e *dispatchError) Error() string {
	s := fmt.Sprintf("%s engine %s: ", e.stage, e.engineID())
	switch e.kind {
	case failUnreachable:
		s += "unreachable"
	case failBreakerOpen:
		s += "circuit breaker open"
	case failTransport:
		s += "connection failed"
	case failTimeout:
		s += fmt.Sprintf("%s timeout after %v", e.phase, e.after)
	case failStatus:
		s += fmt.Sprintf("answered %d %s", e.status, http.StatusText(e.status))
	case failMalformed:
		s += "malformed answer"
	case failClientGone:
		s += "client went away"
	case failShutdown:
		s += "cut by shutdown"
	}
	if e.engineMsg != "" {
		s += ": " + e.engineMsg
	}
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

// retriable reports whether the engine never received the request, so another engine
// may get it. Nothing else is retried: an engine that received a request may be running
// it (a second dispatch doubles the work and, for PD, the KV transfer), and a response
// that began cannot be taken back.
func (e *dispatchError) retriable() bool {
	return !e.sent && e.kind == failUnreachable || e.kind == failBreakerOpen || (e.kind == failTimeout && e.phase == phaseConnect)
}

// rejection reports whether the engine refused the request itself (4xx other than 429):
// a client mistake that no retry can fix, which must reach the client as a 4xx.
func (e *dispatchError) rejection() bool {
	return e.kind == failStatus && e.status >= 400 && e.status < 500 && e.status != http.StatusTooManyRequests
}

// breakerFailure reports whether the failure counts against the engine's breaker.
func (e *dispatchError) breakerFailure() bool {
	switch e.kind {
	case failUnreachable, failTransport, failTimeout, failMalformed:
		return true
	case failStatus:
		return e.status >= 500 || e.status == http.StatusTooManyRequests
	}
	return false
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
func failureResponse(err error) (status int, code, msg string) {
	var de *dispatchError
	if !errors.As(err, &de) {
		return http.StatusBadGateway, codeEngineError, "dispatch failed"
	}
	failed := codeEngineError
	if de.stage == plan.RolePrefill {
		failed = codePrefillError
	}
	who := "engine " + de.engineID()
	if de.stage != plan.RolePlain {
		who = string(de.stage) + " " + who
	}
	switch de.kind {
	case failBreakerOpen:
		return http.StatusServiceUnavailable, codeEngineUnavailable, who + " is failing (circuit breaker open); no other engine was available"
	case failTimeout:
		code := codeEngineTimeout
		if de.stage == plan.RolePrefill {
			code = codePrefillError
		}
		return http.StatusGatewayTimeout, code, fmt.Sprintf("%s timed out (%s, %v)", who, de.phase, de.after)
	case failStatus:
		m := fmt.Sprintf("%s answered %d %s", who, de.status, http.StatusText(de.status))
		switch {
		case de.rejection():
			if de.engineMsg != "" {
				m += ": " + de.engineMsg
			}
			return de.status, codeEngineRejected, m
		case de.status == http.StatusTooManyRequests:
			// Passed on as 429, so clients back off, but counted against the engine's
			// breaker: an engine shedding load must stop attracting traffic.
			return de.status, codeEngineRejected, m
		}
		return http.StatusBadGateway, failed, m
	case failMalformed:
		return http.StatusBadGateway, failed, who + " failed: malformed answer"
	case failClientGone:
		return statusClientClosed, codeClientClosed, "client closed the request"
	case failShutdown:
		return http.StatusServiceUnavailable, codeDraining, "the router is shutting down"
	}
	return http.StatusBadGateway, failed, who + " failed: connection error"
}

// errHardStop is the cause of the hard stop (Server.hardStop), which every request's
// context inherits.
var errHardStop = errors.New("the shutdown grace period ran out")

// classify turns a transport error of a dispatch under ctx into a dispatchError. A
// deadline cause set on ctx wins, then the router's hard stop, then the client's own
// cancellation.
func classify(ctx, client context.Context, err error, w *engine.Worker, stage plan.Role) *dispatchError {
	var de *dispatchError
	cause := context.Cause(ctx)
	if errors.As(cause, &de) {
		return de
	}
	if errors.Is(cause, errHardStop) {
		return &dispatchError{kind: failShutdown, stage: stage, worker: w}
	}
	if errors.As(err, &de) {
		return de
	}
	if client.Err() != nil {
		return &dispatchError{kind: failClientGone, stage: stage, worker: w}
	}
	out := &dispatchError{kind: failTransport, stage: stage, worker: w, detail: err.Error()}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		out.kind = failUnreachable
		if op.Timeout() {
			out.kind, out.phase = failTimeout, phaseConnect
		}
	}
	return out
}
