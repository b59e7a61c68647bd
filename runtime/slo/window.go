package slo

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"
)

// Window is a bounded, decaying record of recent observations of one latency, from which
// it estimates a quantile. It keeps at most its capacity of samples, overwriting the
// oldest; each sample counts 2^(-age/halfLife), so an estimate follows the bucket's
// current behaviour and, when traffic stops, fades until it is unknown and the configured
// estimate applies again. Memory is fixed at construction, whatever is observed.
//
// A Window is safe for concurrent use.
type Window struct {
	clock     func() time.Time
	halfLife  time.Duration
	minWeight float64

	mu      sync.Mutex
	samples []sample // ring of at most cap(samples)
	next    int      // where the next sample goes once the ring is full
	sorted  []sample // scratch for Quantile, cap(samples)
	// memo is the last Quantile result. It is reused while its weights have decayed by
	// little (memoAge) and, once a sample arrived since (stale), for a moment longer
	// (staleAge), so that a busy bucket sorts its samples a few times a second rather
	// than on every request.
	memo struct {
		valid, stale  bool
		q             float64
		at            time.Time
		value, weight float64
		known         bool
	}
}

// memoAge and staleAge bound a memoized quantile's age as fractions of the half-life: its
// weights have decayed by at most about 4%, and new samples wait at most 1/4096 of a
// half-life (15 ms of the default minute) to count.
const (
	memoAge  = 16
	staleAge = 4096
)

type sample struct {
	value float64
	at    time.Time
}

// NewWindow returns an empty window of capacity samples (at least 1) whose samples halve
// in weight every halfLife, and whose estimate is known once their decayed weight reaches
// minWeight. clock is the time source; nil is time.Now.
func NewWindow(capacity int, halfLife time.Duration, minWeight float64, clock func() time.Time) *Window {
	if clock == nil {
		clock = time.Now
	}
	capacity = max(capacity, 1)
	return &Window{
		clock: clock, halfLife: halfLife, minWeight: minWeight,
		samples: make([]sample, 0, capacity), sorted: make([]sample, 0, capacity),
	}
}

// Add records an observation made now. A negative, NaN or infinite value is no
// observation and is dropped.
func (w *Window) Add(v float64) {
	if !(v >= 0) || math.IsInf(v, 0) {
		return
	}
	s := sample{value: v, at: w.clock()}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.memo.stale = true
	if len(w.samples) < cap(w.samples) {
		w.samples = append(w.samples, s)
		return
	}
	w.samples[w.next] = s
	w.next = (w.next + 1) % len(w.samples)
}

// Quantile returns the q-quantile (0 < q < 1) of the samples weighted by their decay, the
// decayed weight it rests on, and whether that weight reaches the window's minimum.
func (w *Window) Quantile(q float64) (value, weight float64, known bool) {
	now := w.clock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := &w.memo; m.valid && m.q == q && !now.Before(m.at) {
		if age := now.Sub(m.at); age < w.halfLife/memoAge && (!m.stale || age < w.halfLife/staleAge) {
			return m.value, m.weight, m.known
		}
	}
	value, weight, known = w.quantile(now, q)
	w.memo.valid, w.memo.stale, w.memo.q, w.memo.at, w.memo.value, w.memo.weight, w.memo.known = true, false, q, now, value, weight, known
	return value, weight, known
}

func (w *Window) quantile(now time.Time, q float64) (value, weight float64, known bool) {
	w.sorted = append(w.sorted[:0], w.samples...)
	slices.SortFunc(w.sorted, func(a, b sample) int { return cmp.Compare(a.value, b.value) })
	for _, s := range w.sorted {
		weight += w.decay(now, s.at)
	}
	if weight <= 0 || weight < w.minWeight {
		return 0, weight, false
	}
	acc := 0.0
	for _, s := range w.sorted {
		if acc += w.decay(now, s.at); acc >= q*weight {
			return s.value, weight, true
		}
	}
	return w.sorted[len(w.sorted)-1].value, weight, true
}

// decay is the weight of a sample taken at at: 1 when new, halving every halfLife. A
// sample stamped in the future (a clock step back) counts as new.
func (w *Window) decay(now, at time.Time) float64 {
	age := now.Sub(at)
	if age <= 0 || w.halfLife <= 0 {
		return 1
	}
	return math.Exp2(-float64(age) / float64(w.halfLife))
}
