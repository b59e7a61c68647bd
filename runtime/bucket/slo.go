package bucket

import (
	"slices"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/slo"
)

// Targets compared by SLO ordering, as traces and metrics name them.
const (
	TargetTTFT = "ttft"
	TargetTPS  = "tps"
)

// Outcomes of a selection against a request's target, for metrics.
const (
	SLONone   = ""       // no target, or its preference is disabled
	SLOMet    = "met"    // the selected bucket's estimate meets the target
	SLOMissed = "missed" // it does not, or the bucket has no estimate
)

// Estimates returns the bucket's SLO estimates; nil when it has none configured. Serving
// feeds the observations of the requests it dispatched to the bucket into them.
func (b *Bucket) Estimates() *slo.Estimates { return b.est }

// sloActive reports whether the request's targets order the buckets: a target whose
// preference is enabled. ParseTargets leaves out targets of disabled preferences; a
// caller that sets them directly gets the same by this check.
func (r *Resolver) sloActive(t slo.Targets) bool {
	return t.TTFTMS > 0 && enabledPref(r.prefs.TTFT) || t.TPS > 0 && enabledPref(r.prefs.TPS)
}

func enabledPref(p string) bool { return p == plan.SLOFirst || p == plan.SLOBestEffort }

// checks compares the bucket's estimates with the request's targets under the model's
// preferences: one check per target whose preference is enabled, and the bucket's penalty:
// each missed best_effort target adds one, each missed slo_first target adds
// sloFirstWeight, so every bucket meeting the slo_first targets is tried before any
// bucket missing one, and among those the best_effort misses order them. buf is reused
// for the checks.
func (b *Bucket) checks(prefs plan.SLOPreferences, t slo.Targets, buf []decision.SLOCheck) ([]decision.SLOCheck, int) {
	out := buf[:0]
	if t.TTFTMS > 0 && enabledPref(prefs.TTFT) {
		e := b.est.TTFT()
		out = append(out, check(TargetTTFT, t.TTFTMS, prefs.TTFT, e, e.Known() && e.Value > 0 && e.Value <= t.TTFTMS))
	}
	if t.TPS > 0 && enabledPref(prefs.TPS) {
		e := b.est.TPS()
		out = append(out, check(TargetTPS, t.TPS, prefs.TPS, e, e.Known() && e.Value >= t.TPS))
	}
	penalty := 0
	for _, c := range out {
		switch {
		case c.Met:
		case c.Preference == plan.SLOFirst:
			penalty += sloFirstWeight
		default:
			penalty++
		}
	}
	return out, penalty
}

// sloFirstWeight is a missed slo_first target's penalty: more than the best_effort misses
// can add (one target each, TTFT and TPS, so at most one best_effort target beside a
// slo_first one), which makes slo_first a tier rather than one penalty among others.
const sloFirstWeight = 2

func check(target string, want float64, pref string, e slo.Estimate, met bool) decision.SLOCheck {
	return decision.SLOCheck{Target: target, Want: want, Preference: pref, Estimate: e.Value, Source: e.Source,
		Met: met, Penalized: !met}
}

// sloOrder appends to dst the buckets that fit the request, ordered by SLO penalty; the
// sort is stable, so buckets of equal penalty keep the design's order (input capacity,
// rank, id). Ordering only reorders whole buckets: each is still tried for its complete
// plain or PD selection, and a rejection still falls through to the next one. A model of
// up to maxStackBuckets buckets is ordered without allocating.
func (r *Resolver) sloOrder(facts *policy.Facts, need int64, rec *decision.Trace, dst []*Bucket) []*Bucket {
	type ranked struct {
		b       *Bucket
		penalty int
		checks  []decision.SLOCheck
	}
	var stack [maxStackBuckets]ranked
	rs := stack[:0]
	var buf [2]decision.SLOCheck
	for _, b := range r.buckets {
		if b.fit(facts.InputTokens, need) != fits {
			continue
		}
		cs, p := b.checks(r.prefs, facts.SLO, buf[:])
		rr := ranked{b: b, penalty: p}
		if rec.Detailed() {
			rr.checks = slices.Clone(cs)
		}
		rs = append(rs, rr)
	}
	slices.SortStableFunc(rs, func(a, b ranked) int { return a.penalty - b.penalty })
	for _, x := range rs {
		dst = append(dst, x.b)
		rec.RankSLO(decision.SLORank{Bucket: x.b.id, Penalty: x.penalty, Checks: x.checks})
	}
	return dst
}

// maxStackBuckets is how many buckets SLO ordering sorts in stack buffers; a model with
// more is ordered on the heap.
const maxStackBuckets = 16

// outcome is the selected bucket's verdict on one target, for metrics.
func outcome(prefs plan.SLOPreferences, t slo.Targets, b *Bucket) (ttft, tps string) {
	var buf [2]decision.SLOCheck
	cs, _ := b.checks(prefs, t, buf[:])
	for _, c := range cs {
		v := SLOMissed
		if c.Met {
			v = SLOMet
		}
		if c.Target == TargetTTFT {
			ttft = v
		} else {
			tps = v
		}
	}
	return ttft, tps
}
