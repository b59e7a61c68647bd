package policy

import (
	"cmp"
	"context"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// PowerOfTwo samples two distinct candidates uniformly and keeps the one under lower stage
// pressure (docs/design.md, Policies: stage pressure). Its cost does not depend on the
// number of candidates.
//
// A single candidate is selected directly, but its load is still read for admission.
// Admission runs exactly once, on the chosen engine, with the load record captured during
// selection; a rejection is returned as AdmissionRejected without resampling or falling
// back to the other sample, so the bucket loop moves on.
type PowerOfTwo struct {
	load   *load.Table
	rand   Rand
	limits Limits
}

// NewPowerOfTwo returns a power-of-two policy reading engine reports from table.
func NewPowerOfTwo(table *load.Table, rnd Rand, limits Limits) *PowerOfTwo {
	return &PowerOfTwo{load: table, rand: rnd, limits: limits}
}

// Reasons given by PowerOfTwo picks.
const (
	reasonOnlyCandidate    = "only candidate"
	reasonLowerPressure    = "lower reported pressure of two samples"
	reasonReportedTie      = "reported pressure tied; fewer router in-flight requests"
	reasonNoNativeReport   = "a sample lacks a fresh native report; fewer router in-flight requests"
	reasonInflightTie      = "a sample lacks a fresh native report and router in-flight counts tie; first sample kept"
	reasonFirstSampleOnTie = "complete tie; first sample kept"
)

// Pick implements Policy.
func (p *PowerOfTwo) Pick(ctx context.Context, engines []*engine.Worker, req *Request) (Pick, error) {
	n := len(engines)
	if n == 0 {
		return noCandidates(req)
	}
	rec := req.Pass.Rec()
	now := p.load.Now()
	if n == 1 {
		w := engines[0]
		r := p.load.LoadAt(w, now)
		rec.Observe(w, r)
		return p.admit(rec, w, r, req.Stage, reasonOnlyCandidate)
	}
	i := p.rand.IntN(n)
	j := p.rand.IntN(n - 1)
	if j >= i {
		j++ // distinct from i, and still uniform over the others
	}
	a, b := engines[i], engines[j]
	ra, rb := p.load.LoadAt(a, now), p.load.LoadAt(b, now)
	rec.Observe(a, ra)
	rec.Observe(b, rb)
	c, reason := comparePressure(req.Stage, a, ra, b, rb, req.InputTokens)
	if c > 0 {
		return p.admit(rec, b, rb, req.Stage, reason)
	}
	return p.admit(rec, a, ra, req.Stage, reason)
}

func (p *PowerOfTwo) admit(rec *decision.Trace, w *engine.Worker, r *load.Report, stage plan.Role, reason string) (Pick, error) {
	if rej := p.limits.admit(rec, w, stage, r); rej != nil {
		return Pick{}, rej
	}
	return Pick{Engine: w, Reason: reason}, nil
}

// comparePressure orders two sampled engines: negative or zero keeps a, positive takes b.
// Reported pressure is used only when both have a fresh, complete native report with a
// valid capacity; otherwise, and to break reported ties, router-local in-flight counts
// decide. A complete tie keeps a, the first sample. inputTokens is the request's prompt
// length, the estimate of each request dispatched since a report (see sincePressure).
func comparePressure(stage plan.Role, a *engine.Worker, ra *load.Report, b *engine.Worker, rb *load.Report, inputTokens int64) (int, string) {
	inflight := cmp.Compare(a.Inflight(), b.Inflight())
	if ra == nil || rb == nil || !ra.ValidCapacity() || !rb.ValidCapacity() {
		if inflight == 0 {
			return 0, reasonInflightTie
		}
		return inflight, reasonNoNativeReport
	}
	var reported int
	switch {
	case stage == plan.RoleDecode:
		reported = decodePressure(ra, rb)
	case ra.DispatchesSince() != 0 || rb.DispatchesSince() != 0:
		reported = sincePressure(ra, rb, inputTokens)
	default:
		reported = prefillPressure(ra, rb)
	}
	switch {
	case reported != 0:
		return reported, reasonLowerPressure
	case inflight != 0:
		return inflight, reasonReportedTie
	default:
		return 0, reasonFirstSampleOnTie
	}
}

// prefillPressure compares plain and prefill engines by the work queued ahead of a new
// prompt: estimated queue time when both report it, then waiting uncached tokens, waiting
// requests and running requests.
func prefillPressure(a, b *load.Report) int {
	return prefillPressureAt(a.HasQueueMS && b.HasQueueMS, a, b)
}

// prefillPressureAt is prefillPressure with the queue-time comparison on or off for a
// whole set of engines. Sorting a set needs that: deciding per pair, as prefillPressure
// does, is not transitive when only some engines report queue time.
func prefillPressureAt(withQueue bool, a, b *load.Report) int {
	queue := 0
	if withQueue {
		queue = cmp.Compare(a.QueueMS, b.QueueMS)
	}
	return cmp.Or(
		queue,
		cmp.Compare(a.WaitingUncachedTokens, b.WaitingUncachedTokens),
		cmp.Compare(a.Waiting, b.Waiting),
		cmp.Compare(a.Running, b.Running),
	)
}

// sincePressure compares plain and prefill engines whose reports lag the router's own
// dispatches: the requests sent since a report are not in it. Comparing the reports alone
// sends every request to the engine that looked lightest at the last poll until the next
// one (with 500 ms polling, tens of requests herd onto one engine and queue there: the
// routing-quality benchmark measured power_of_two slower than random on unique prompts).
// Each dispatch since the report counts as one more waiting request of this request's
// length; queue time, which cannot be corrected, is not compared. The cache-aware
// policy's load comparisons (pressure.go) apply the same correction.
func sincePressure(a, b *load.Report, inputTokens int64) int {
	tok := max(inputTokens, 1)
	da, db := a.DispatchesSince(), b.DispatchesSince()
	return cmp.Or(
		cmp.Compare(a.WaitingUncachedTokens+da*tok, b.WaitingUncachedTokens+db*tok),
		cmp.Compare(a.Waiting+da, b.Waiting+db),
		cmp.Compare(a.Running, b.Running),
	)
}

// decodePressure compares decode engines by queueing, then batch size, then KV-cache
// occupancy as a fraction of capacity and in tokens.
func decodePressure(a, b *load.Report) int {
	return cmp.Or(
		cmp.Compare(a.Waiting, b.Waiting),
		cmp.Compare(a.Running, b.Running),
		cmp.Compare(float64(a.UsedKVTokens)/float64(a.MaxKVTokens), float64(b.UsedKVTokens)/float64(b.MaxKVTokens)),
		cmp.Compare(a.UsedKVTokens, b.UsedKVTokens),
	)
}
