package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerState is a circuit breaker's state.
type BreakerState int32

// Breaker states. Closed passes traffic; Open keeps the engine out of candidate sets;
// HalfOpen lets one probe request through to decide.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "closed"
}

// Breaker is an engine's passive health: consecutive dispatch failures (transport
// errors, timeouts, 429 and 5xx answers, and the 4xx that are the engine's own fault, as
// dispatch classifies them) open it, so an engine that fails fast stops
// looking idle and attracting traffic. After the open period one probe request is let
// through (half-open); its success closes the breaker, its failure reopens it.
//
// Selection reads the state lock-free (Allow); only dispatch outcomes and the rare
// transitions take the mutex.
type Breaker struct {
	threshold int
	openFor   time.Duration
	clock     func() time.Time

	state     atomic.Int32
	openUntil atomic.Int64 // Unix nanoseconds; meaningful while open

	mu       sync.Mutex
	failures int
	probing  bool
	trips    atomic.Int64
}

// NewBreaker returns a closed breaker that opens after threshold consecutive failures
// for openFor. clock is the time source; nil means time.Now.
func NewBreaker(threshold int, openFor time.Duration, clock func() time.Time) *Breaker {
	if clock == nil {
		clock = time.Now
	}
	return &Breaker{threshold: max(threshold, 1), openFor: openFor, clock: clock}
}

// Configure changes the threshold and the open period, keeping the breaker's state: a
// reload that changes the breaker settings applies them to engines that stay. A breaker
// already open stays open until the end of the period it was opened for.
func (b *Breaker) Configure(threshold int, openFor time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.threshold, b.openFor = max(threshold, 1), openFor
}

// State returns the current state; an open breaker whose period has passed reads as
// half-open.
func (b *Breaker) State() BreakerState {
	st := BreakerState(b.state.Load())
	if st == BreakerOpen && b.clock().UnixNano() >= b.openUntil.Load() {
		return BreakerHalfOpen
	}
	return st
}

// Trips returns how many times the breaker has opened.
func (b *Breaker) Trips() int64 { return b.trips.Load() }

// Allow reports whether selection may pick the engine: closed, or ready for a probe.
func (b *Breaker) Allow() bool {
	switch b.State() {
	case BreakerClosed:
		return true
	case BreakerHalfOpen:
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.probing
	}
	return false
}

// Acquire claims the right to dispatch: always while closed; in half-open only the one
// probe. A caller that acquired must report exactly one of Success, Failure or Abandon.
func (b *Breaker) Acquire() bool {
	if BreakerState(b.state.Load()) == BreakerClosed {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.State() {
	case BreakerClosed:
		return true
	case BreakerHalfOpen:
		if b.probing {
			return false
		}
		b.probing = true
		b.state.Store(int32(BreakerHalfOpen))
		return true
	}
	return false
}

// Success records a dispatch the engine handled: the breaker closes.
func (b *Breaker) Success() {
	if BreakerState(b.state.Load()) == BreakerClosed {
		b.mu.Lock()
		b.failures = 0
		b.mu.Unlock()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.probing = 0, false
	b.state.Store(int32(BreakerClosed))
}

// Failure records a failed dispatch: the threshold-th consecutive failure, or a failed
// probe, opens the breaker.
func (b *Breaker) Failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if BreakerState(b.state.Load()) == BreakerHalfOpen || b.failures >= b.threshold {
		b.failures, b.probing = 0, false
		b.openUntil.Store(b.clock().Add(b.openFor).UnixNano())
		b.state.Store(int32(BreakerOpen))
		b.trips.Add(1)
	}
}

// Abandon records a dispatch with no verdict (the client went away): a probe slot is
// given back.
func (b *Breaker) Abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}
