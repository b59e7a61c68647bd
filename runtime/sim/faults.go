package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"
)

// Faults is the set of failures an engine simulates. The zero value is a healthy engine.
// Faults are set at start ([EngineSpec.Faults]) and replaced at run time with
// [Engine.SetFaults] or PUT /sim/faults.
type Faults struct {
	// FailStatus, when set, answers chat completions with this HTTP status (400-599) and
	// an SGLang-shaped error body, before any work is queued.
	FailStatus int `json:"fail_status,omitempty"`
	// FailRate is the fraction of requests that fail with FailStatus; 0 means all of them.
	FailRate float64 `json:"fail_rate,omitempty"`
	// Hang accepts chat completions and never answers, until the client gives up.
	Hang bool `json:"hang,omitempty"`
	// CutStream drops the connection after CutAfterTokens generated tokens, or before the
	// end of a shorter answer: a stream ends without its final chunk and [DONE], a JSON
	// body ends half-written.
	CutStream      bool `json:"cut_stream,omitempty"`
	CutAfterTokens int  `json:"cut_after_tokens,omitempty"`
	// Slowdown multiplies every step's duration; 0 and 1 mean normal speed.
	Slowdown float64 `json:"slowdown,omitempty"`
	// Unhealthy makes /health and /health_generate answer 503.
	Unhealthy bool `json:"unhealthy,omitempty"`
	// StaleLoad freezes the load endpoints at the report taken when it was switched on,
	// timestamps included, while the engine keeps working.
	StaleLoad bool `json:"stale_load,omitempty"`
	// MalformedLoad makes the load endpoints answer 200 with bodies that do not parse.
	MalformedLoad bool `json:"malformed_load,omitempty"`
	// DropKVEvents loses KV-event batches on the wire: they are numbered and kept for the
	// replay socket, but not sent, so a subscriber sees a sequence gap.
	DropKVEvents bool `json:"drop_kv_events,omitempty"`
	// FirstByteDelayMS holds chat completions this long (wall clock) before any byte of
	// the answer, headers included.
	FirstByteDelayMS int `json:"first_byte_delay_ms,omitempty"`
	// GarbageBody answers chat completions 200 with a body that is neither JSON nor an
	// event stream, under the content type the request asked for.
	GarbageBody bool `json:"garbage_body,omitempty"`
}

// Validate reports a fault setting that cannot be simulated.
func (f Faults) Validate() error {
	if f.FailStatus != 0 && (f.FailStatus < 400 || f.FailStatus > 599) {
		return fmt.Errorf("fail_status must be between 400 and 599, got %d", f.FailStatus)
	}
	if f.FailRate < 0 || f.FailRate > 1 {
		return fmt.Errorf("fail_rate must be between 0 and 1, got %v", f.FailRate)
	}
	if f.CutAfterTokens < 0 || f.Slowdown < 0 || f.FirstByteDelayMS < 0 {
		return errors.New("cut_after_tokens, slowdown and first_byte_delay_ms must not be negative")
	}
	return nil
}

// failNow decides whether this request fails.
func (f Faults) failNow() bool {
	return f.FailStatus != 0 && (f.FailRate == 0 || rand.Float64() < f.FailRate)
}

// delayFirstByte waits out FirstByteDelayMS, or until the client or the engine gives up;
// it reports whether to go on.
func (e *Engine) delayFirstByte(ctx context.Context, f Faults) bool {
	if f.FirstByteDelayMS <= 0 {
		return true
	}
	t := time.NewTimer(time.Duration(f.FirstByteDelayMS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-e.closing:
	}
	return false
}

// writeGarbage answers 200 with bytes no client can parse.
func writeGarbage(w http.ResponseWriter, stream bool) {
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("\x00<html>garbage{\"choices\": [\n"))
}

// Kill stops the engine as a crash would look to a client: its listener closes and
// connections in progress are dropped.
func (e *Engine) Kill() error { return e.close() }

// faultState is what an engine reads per request: the faults and, while StaleLoad is on,
// the frozen load report.
type faultState struct {
	Faults
	stale *loadSnapshot
}

// Faults returns the engine's current faults.
func (e *Engine) Faults() Faults { return e.faults.Load().Faults }

// SetFaults replaces the engine's faults. Switching StaleLoad on freezes the load report
// as it is at this moment.
func (e *Engine) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	e.faultsMu.Lock()
	defer e.faultsMu.Unlock()
	next := &faultState{Faults: f}
	if f.StaleLoad {
		next.stale = e.faults.Load().stale
		if next.stale == nil {
			next.stale = e.snapshot(time.Now())
		}
	}
	e.faults.Store(next)
	return nil
}

// handleFaults serves /sim/faults: GET shows the faults, PUT or POST replaces them with
// the JSON body, DELETE clears them.
func (e *Engine) handleFaults(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut, http.MethodPost:
		var f Faults
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			writeError(w, http.StatusBadRequest, "invalid faults: "+err.Error())
			return
		}
		if err := e.SetFaults(f); err != nil {
			writeError(w, http.StatusBadRequest, "invalid faults: "+err.Error())
			return
		}
	case http.MethodDelete:
		_ = e.SetFaults(Faults{}) // the zero value is always valid
	default:
		w.Header().Set("Allow", "GET, PUT, POST, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	writeJSON(w, http.StatusOK, e.Faults())
}
