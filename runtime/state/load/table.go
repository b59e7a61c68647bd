// Package load holds the engine-reported load table and the router-local in-flight
// accounting that selection policies read.
//
// Engine reports are per data-parallel rank. An engine's report is usable only when every
// one of its ranks has reported within the freshness window; a missing, stale or
// rank-incomplete report is unknown (nil), never zero, because zero would make a silent
// engine look idle and attract all traffic.
//
// Reads are engine-scoped and lock-free: each engine has a slot holding an atomic pointer
// to an immutable aggregate, rebuilt whenever a rank reports. A pick reads only the slots
// of the engines it looks at, never the whole table.
package load

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// DefaultStaleAfter is the freshness window for engines whose plan sets none.
const DefaultStaleAfter = 2 * time.Second

// Sample is one load observation: a single rank's report as the engine publishes it, or
// an engine's aggregate over its ranks.
type Sample struct {
	// At is when the engine captured the sample; for an aggregate, its oldest rank's.
	At time.Time `json:"at"`

	// Reported by every publisher ("basic" and "native").
	Running int64 `json:"running"`
	Waiting int64 `json:"waiting"`

	// Native is set when the publisher supplies the fields below. Basic reports from older
	// publishers leave it false, and those fields are then meaningless.
	Native                bool  `json:"native"`
	WaitingUncachedTokens int64 `json:"waiting_uncached_tokens"`
	UsedKVTokens          int64 `json:"used_kv_tokens"`
	// TotalKVTokens is used plus pending-prefill tokens (SGLang's num_total_tokens): the
	// KV the engine is committed to, which the max_kv_tokens cap reads.
	TotalKVTokens int64 `json:"total_kv_tokens"`
	MaxKVTokens   int64 `json:"max_kv_tokens"`
	MaxRunning    int64 `json:"max_running"`
	// KVKnown is set when a basic report still carries KV usage and capacity (vLLM's
	// /metrics: kv_cache_usage_perc and cache_config_info): UsedKVTokens, TotalKVTokens
	// and MaxKVTokens are then meaningful although the report is not native.
	KVKnown bool `json:"kv_known,omitempty"`

	// QueueMS is the estimated prefill queue time, meaningful only when HasQueueMS.
	QueueMS    float64 `json:"queue_ms,omitempty"`
	HasQueueMS bool    `json:"has_queue_ms,omitempty"`
}

// Report is an engine's usable aggregate load: every rank present and, when returned by
// Table.Load, fresh. Reports are immutable once published and may be retained by a
// policy across its selection and admission.
type Report struct {
	Sample

	// dispatched is the engine's live dispatch counter and mark its value when this report
	// was published; their difference is the number of dispatches the report cannot show.
	dispatched *atomic.Uint64
	mark       uint64
	// at is Sample.At on the table's monotonic clock, so freshness checks compare
	// integers instead of reading the wall clock.
	at Instant
}

// ValidCapacity reports whether the report is native and carries a usable KV capacity,
// which the decode pressure comparison divides by.
func (r *Report) ValidCapacity() bool { return r.Native && r.MaxKVTokens > 0 }

// DispatchesSince returns how many requests the router has dispatched to the engine since
// this report was published. Adding it to the reported queue corrects for reports that lag
// behind the router's own decisions.
func (r *Report) DispatchesSince() int64 { return int64(r.dispatched.Load() - r.mark) }

// Table is the shared engine-reported load table. Build it once per router; it is safe for
// concurrent use.
type Table struct {
	clock  func() time.Time // nil: the process's monotonic clock
	origin time.Time
	// members is the table's slots, replaced whole (copy on write) when an engine is
	// added or removed, so reads take no lock.
	members atomic.Pointer[slots]
	mu      sync.Mutex // serialises membership changes
	// free lists the slot numbers of removed engines, reused by the next engine added,
	// so a table whose engines come and go stays as long as its largest membership.
	free []int
}

type slots struct {
	byID map[string]*slot
	// byIndex holds the same slots by slot number (an engine's plan position for the
	// engines of the first plan), for workers that know their number; nil for a free one.
	byIndex []*slot
}

// Instant is a reading of a table's clock: the time since the table's origin. Policies
// read it once per pick and pass it to every Load of that pick, so all their observations
// share one instant.
type Instant time.Duration

type slot struct {
	id         string
	staleAfter time.Duration
	dispatched atomic.Uint64
	report     atomic.Pointer[Report] // nil until every rank has reported

	mu    sync.Mutex // serialises rank updates and aggregation
	ranks []Sample
	seen  []bool
}

// NewTable returns a table with an empty slot per engine. clock is the time used for
// freshness; nil selects the process's monotonic clock, which is what serving wants and
// costs about half of time.Now per read. Tests and fixtures pass a fixed clock.
func NewTable(engines []plan.Engine, clock func() time.Time) *Table {
	t := &Table{clock: clock, origin: time.Now()}
	if clock != nil {
		t.origin = clock()
	}
	m := &slots{byID: make(map[string]*slot, len(engines)), byIndex: make([]*slot, len(engines))}
	for i, e := range engines {
		sl := newSlot(e)
		m.byID[e.ID], m.byIndex[i] = sl, sl
	}
	t.members.Store(m)
	return t
}

func newSlot(e plan.Engine) *slot {
	dp := max(e.DPSize, 1)
	stale := time.Duration(e.Load.StaleAfterMS) * time.Millisecond
	if stale <= 0 {
		stale = DefaultStaleAfter
	}
	return &slot{id: e.ID, staleAfter: stale, ranks: make([]Sample, dp), seen: make([]bool, dp)}
}

// Add gives an engine an empty slot and returns its slot number, for the engine's worker
// (engine.Worker.SetIndex). An engine already in the table keeps its slot and reports.
func (t *Table) Add(e plan.Engine) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.members.Load()
	if sl := old.byID[e.ID]; sl != nil {
		return slices.Index(old.byIndex, sl)
	}
	next := &slots{byID: maps.Clone(old.byID), byIndex: slices.Clone(old.byIndex)}
	sl := newSlot(e)
	i := len(next.byIndex)
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
		next.byIndex[i] = sl
	} else {
		next.byIndex = append(next.byIndex, sl)
	}
	next.byID[e.ID] = sl
	t.members.Store(next)
	return i
}

// Remove forgets an engine's slot and frees its number for the next engine added. A
// worker still holding the number finds another engine's slot there and falls back to
// its id, which no longer has one: its load is unknown.
func (t *Table) Remove(engineID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.members.Load()
	sl := old.byID[engineID]
	if sl == nil {
		return
	}
	next := &slots{byID: maps.Clone(old.byID), byIndex: slices.Clone(old.byIndex)}
	delete(next.byID, engineID)
	i := slices.Index(next.byIndex, sl)
	next.byIndex[i] = nil
	t.free = append(t.free, i)
	t.members.Store(next)
}

// Len returns how many engines have a slot.
func (t *Table) Len() int { return len(t.members.Load().byID) }

// Slots returns how many slots the table has, used or free: its largest membership.
func (t *Table) Slots() int { return len(t.members.Load().byIndex) }

// slotOf returns w's slot: by slot number when the worker has one that names the same
// engine (no hashing on the pick path), else by id.
func (t *Table) slotOf(w *engine.Worker) *slot {
	m := t.members.Load()
	if i := w.Index(); i >= 0 && i < len(m.byIndex) && m.byIndex[i] != nil && m.byIndex[i].id == w.ID() {
		return m.byIndex[i]
	}
	return m.byID[w.ID()]
}

// Now returns the table's clock reading.
func (t *Table) Now() Instant {
	switch {
	case t == nil:
		return 0
	case t.clock == nil:
		return Instant(time.Since(t.origin))
	default:
		return Instant(t.clock().Sub(t.origin))
	}
}

// Update records one rank's sample and republishes the engine's aggregate once every rank
// has reported. A rank that reports again replaces its previous sample.
func (t *Table) Update(engineID string, rank int, s Sample) error {
	sl := t.members.Load().byID[engineID]
	if sl == nil {
		return fmt.Errorf("updating load of engine %q: engine not in the load table", engineID)
	}
	if rank < 0 || rank >= len(sl.ranks) {
		return fmt.Errorf("updating load of engine %q: rank %d out of range [0, %d)", engineID, rank, len(sl.ranks))
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.ranks[rank], sl.seen[rank] = s, true
	for _, ok := range sl.seen {
		if !ok {
			return nil
		}
	}
	a := aggregate(sl.ranks)
	r := &Report{Sample: a, dispatched: &sl.dispatched, mark: sl.dispatched.Load(), at: Instant(a.At.Sub(t.origin))}
	sl.report.Store(r)
	return nil
}

// aggregate sums the ranks. The result is native only when every rank is, has a queue
// estimate only when every rank has one (the slowest rank's, since a request may land on
// it), and is as old as its oldest rank.
func aggregate(ranks []Sample) Sample {
	a := ranks[0]
	for _, s := range ranks[1:] {
		if s.At.Before(a.At) {
			a.At = s.At
		}
		a.Running += s.Running
		a.Waiting += s.Waiting
		a.Native = a.Native && s.Native
		a.KVKnown = a.KVKnown && s.KVKnown
		a.WaitingUncachedTokens += s.WaitingUncachedTokens
		a.UsedKVTokens += s.UsedKVTokens
		a.TotalKVTokens += s.TotalKVTokens
		a.MaxKVTokens += s.MaxKVTokens
		a.MaxRunning += s.MaxRunning
		a.HasQueueMS = a.HasQueueMS && s.HasQueueMS
		a.QueueMS = max(a.QueueMS, s.QueueMS)
	}
	if !a.HasQueueMS {
		a.QueueMS = 0
	}
	return a
}

// Load returns the engine's report if it is complete and fresh at now, else nil: unknown.
// A nil table knows nothing, which lets policies run without engine reports.
func (t *Table) Load(w *engine.Worker, now time.Time) *Report {
	if t == nil {
		return nil
	}
	return t.LoadAt(w, Instant(now.Sub(t.origin)))
}

// LoadAt is Load at an instant of the table's clock. Selection policies use it with one
// Now reading per pick, which is cheaper than reading the wall clock.
func (t *Table) LoadAt(w *engine.Worker, now Instant) *Report {
	if t == nil {
		return nil
	}
	sl := t.slotOf(w)
	if sl == nil {
		return nil
	}
	r := sl.report.Load()
	if r == nil || time.Duration(now-r.at) > sl.staleAfter {
		return nil
	}
	return r
}

// Guard is one dispatched request's share of an engine's in-flight count.
type Guard struct {
	w        *engine.Worker
	released atomic.Bool
}

// Acquire counts a request dispatched to w: it raises w's in-flight count and the engine's
// dispatches-since-report counter. Release the guard on every path; deferring Release
// right after Acquire is the intended use.
func (t *Table) Acquire(w *engine.Worker) *Guard {
	w.AddInflight(1)
	if t != nil {
		if sl := t.slotOf(w); sl != nil {
			sl.dispatched.Add(1)
		}
	}
	return &Guard{w: w}
}

// Release gives the request's in-flight count back. It is idempotent, so an error path and
// a deferred call may both release the same guard.
func (g *Guard) Release() {
	if g.released.CompareAndSwap(false, true) {
		g.w.AddInflight(-1)
	}
}
