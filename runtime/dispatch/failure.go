package dispatch

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

// Kind classifies a failed dispatch.
type Kind int

const (
	// Unreachable: the connection to the engine could not be made, so the engine
	// never received the request (retriable).
	Unreachable Kind = iota
	// BreakerOpen: the engine's breaker refused the dispatch; nothing was sent
	// (retriable).
	BreakerOpen
	// Transport: the connection failed after the request was sent.
	Transport
	// Timeout: a dispatch deadline passed (phase says which).
	Timeout
	// BadStatus: the engine answered an error status.
	BadStatus
	// Malformed: the engine answered something that is not a usable response (a
	// redirect, a body that is not JSON, a body cut short).
	Malformed
	// ClientGone: the client's connection ended first.
	ClientGone
	// Shutdown: the router's shutdown grace period expired.
	Shutdown
)

// Timeout phases, the label values of router_timeouts_total.
const (
	PhaseConnect       = "connect"
	PhaseFirstByte     = "first_byte"
	PhaseStreamIdle    = "stream_idle"
	PhaseTotal         = "total"
	PhasePrefillStatus = "prefill_status"
	PhaseBodyRead      = "body_read"
)

// Error is a failed dispatch to one engine. Its Error text carries every detail
// for the logs; what the client sees is decided by failureResponse alone.
type Error struct {
	Kind   Kind
	Stage  plan.Role
	Worker *engine.Worker
	// Status is the engine's answer for BadStatus.
	Status int
	// Phase and After describe a timeout.
	Phase string
	After time.Duration
	// EngineMsg is the message of a 4xx answer: the engine telling the client what is
	// wrong with its request, the one piece of an engine's body a client sees.
	EngineMsg string
	// Detail is for the logs only: transport errors, 5xx bodies, URLs.
	Detail string
	// sent: another engine already got the request (the other PD half), so even a
	// failure to reach this one is not retried.
	sent bool
}

func (e *Error) EngineID() string {
	if e.Worker == nil {
		return "?"
	}
	return e.Worker.ID()
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s engine %s: ", e.Stage, e.EngineID())
	switch e.Kind {
	case Unreachable:
		s += "unreachable"
	case BreakerOpen:
		s += "circuit breaker open"
	case Transport:
		s += "connection failed"
	case Timeout:
		s += fmt.Sprintf("%s timeout after %v", e.Phase, e.After)
	case BadStatus:
		s += fmt.Sprintf("answered %d %s", e.Status, http.StatusText(e.Status))
	case Malformed:
		s += "malformed answer"
	case ClientGone:
		s += "client went away"
	case Shutdown:
		s += "cut by shutdown"
	}
	if e.EngineMsg != "" {
		s += ": " + e.EngineMsg
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Retriable reports whether the engine never received the request, so another engine
// may get it. Nothing else is retried: an engine that received a request may be running
// it (a second dispatch doubles the work and, for PD, the KV transfer), and a response
// that began cannot be taken back.
func (e *Error) Retriable() bool {
	return !e.sent && e.Kind == Unreachable || e.Kind == BreakerOpen || (e.Kind == Timeout && e.Phase == PhaseConnect)
}

// Rejection reports whether the engine refused the request itself (4xx other than 429):
// a client mistake that no retry can fix, which must reach the client as a 4xx.
func (e *Error) Rejection() bool {
	return e.Kind == BadStatus && e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests
}

// breakerFailure reports whether the failure counts against the engine's breaker.
func (e *Error) breakerFailure() bool {
	switch e.Kind {
	case Unreachable, Transport, Timeout, Malformed:
		return true
	case BadStatus:
		return e.Status >= 500 || e.Status == http.StatusTooManyRequests
	}
	return false
}

// ErrHardStop is the cause the router cancels every request's context with when its
// shutdown grace period runs out: a dispatch then ends as a Shutdown failure.
var ErrHardStop = errors.New("the shutdown grace period ran out")

// classify turns a transport error of a dispatch under ctx into a Error. A
// deadline cause set on ctx wins, then the router's hard stop, then the client's own
// cancellation.
func classify(ctx, client context.Context, err error, w *engine.Worker, stage plan.Role) *Error {
	var de *Error
	cause := context.Cause(ctx)
	if errors.As(cause, &de) {
		return de
	}
	if errors.Is(cause, ErrHardStop) {
		return &Error{Kind: Shutdown, Stage: stage, Worker: w}
	}
	if errors.As(err, &de) {
		return de
	}
	if client.Err() != nil {
		return &Error{Kind: ClientGone, Stage: stage, Worker: w}
	}
	out := &Error{Kind: Transport, Stage: stage, Worker: w, Detail: err.Error()}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		out.Kind = Unreachable
		if op.Timeout() {
			out.Kind, out.Phase = Timeout, PhaseConnect
		}
	}
	return out
}
