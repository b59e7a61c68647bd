package policy

import (
	"cmp"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/state/load"
)

// obs is one candidate as a pick observed it: its load report (nil when unknown) and a
// snapshot of its router in-flight count, so that comparisons within one pick, sorts in
// particular, see fixed values.
type obs struct {
	w        *engine.Worker
	r        *load.Report
	inflight int64
	// since is the requests the router dispatched to w after its report, snapshotted with
	// inflight: the report does not count them.
	since int64
	// matched is the cache-aware policy's cached prefix of the request, in tokens.
	matched int64
}

// observe reads w's load at now and records the read.
func observe(rec *decision.Trace, table *load.Table, w *engine.Worker, now load.Instant) obs {
	r := table.LoadAt(w, now)
	rec.Observe(w, r)
	o := obs{w: w, r: r, inflight: w.Inflight()}
	if r != nil {
		o.since = r.DispatchesSince()
	}
	return o
}

// pressureLevel is the precision at which a set of plain or prefill engines is compared:
// the highest level every engine of the set supports. Comparing a whole set at one level
// makes the order total, so it can be sorted or searched for a minimum.
type pressureLevel uint8

const (
	// byInflight: some engine lacks a fresh native report; router in-flight counts only.
	byInflight pressureLevel = iota
	// byReport: waiting uncached tokens, waiting and running requests, then in-flight.
	byReport
	// byQueueTime: estimated prefill queue time first, then as byReport.
	byQueueTime
)

// pressure compares the engines of one set at one level. tok is the request's prompt
// length: each dispatch since an engine's report counts as a waiting request of that
// length (see sincePressure).
type pressure struct {
	lv  pressureLevel
	tok int64
}

// levelOf returns the level every engine of os supports. Queue time is compared only when
// every report is current (no dispatch since): it cannot be corrected for dispatches.
func levelOf(os []obs, inputTokens int64) pressure {
	lv := byQueueTime
	for i := range os {
		r := os[i].r
		if r == nil || !r.ValidCapacity() {
			return pressure{byInflight, 0}
		}
		if !r.HasQueueMS || os[i].since != 0 {
			lv = byReport
		}
	}
	return pressure{lv, max(inputTokens, 1)}
}

// compare orders a and b by prefill pressure at the level, then by in-flight requests.
// Equal means equally pressured; callers break the tie. Every term is a per-engine key, so
// the order is total over a set and can be sorted.
func (p pressure) compare(a, b *obs) int {
	c := 0
	switch p.lv {
	case byQueueTime:
		c = prefillPressureAt(true, a.r, b.r)
	case byReport:
		c = cmp.Or(
			cmp.Compare(a.r.WaitingUncachedTokens+a.since*p.tok, b.r.WaitingUncachedTokens+b.since*p.tok),
			cmp.Compare(a.r.Waiting+a.since, b.r.Waiting+b.since),
			cmp.Compare(a.r.Running, b.r.Running),
		)
	}
	return cmp.Or(c, cmp.Compare(a.inflight, b.inflight))
}
