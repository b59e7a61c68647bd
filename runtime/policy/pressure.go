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
	// matched is the cache-aware policy's cached prefix of the request, in tokens.
	matched int64
}

// observe reads w's load at now and records the read.
func observe(rec *decision.Trace, table *load.Table, w *engine.Worker, now load.Instant) obs {
	r := table.LoadAt(w, now)
	rec.Observe(w, r)
	return obs{w: w, r: r, inflight: w.Inflight()}
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

// levelOf returns the level every engine of os supports.
func levelOf(os []obs) pressureLevel {
	lv := byQueueTime
	for i := range os {
		r := os[i].r
		if r == nil || !r.ValidCapacity() {
			return byInflight
		}
		if !r.HasQueueMS {
			lv = byReport
		}
	}
	return lv
}

// compare orders a and b by prefill pressure at the level, then by in-flight requests.
// Equal means equally pressured; callers break the tie.
func (lv pressureLevel) compare(a, b *obs) int {
	c := 0
	if lv >= byReport {
		c = prefillPressureAt(lv == byQueueTime, a.r, b.r)
	}
	return cmp.Or(c, cmp.Compare(a.inflight, b.inflight))
}
