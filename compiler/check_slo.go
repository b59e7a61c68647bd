package compiler

import (
	"cuelang.org/go/cue"

	"github.com/routerkit/router/runtime/plan"
)

// checkSLO reports SLO settings that cannot work: a preference no bucket of the model has
// an estimate for, under which every bucket misses every target and the order never
// changes, and a learned estimate that needs more samples than its bucket keeps.
func (c *checker) checkSLO(m *plan.Model) {
	at := sel("models", m.Name, "slo")
	var ttft, tps bool
	for i, b := range m.Buckets {
		e := b.Estimates
		if e == nil {
			continue
		}
		ttft = ttft || e.TTFTMS != nil || e.Learn != nil
		tps = tps || e.TPS != nil || e.Learn != nil
		if l := e.Learn; l != nil && l.MinSamples > l.Samples {
			c.at(sel("models", m.Name, "buckets", i, "estimates", "learn", "min_samples"),
				"min_samples (%d) is more than samples (%d), so the learned estimate could never be used: lower min_samples or raise samples", l.MinSamples, l.Samples)
		}
	}
	for _, p := range []struct {
		field, pref, estimate string
		has                   bool
	}{{"ttft", m.SLO.TTFT, "ttft_ms", ttft}, {"tps", m.SLO.TPS, "tps", tps}} {
		if p.pref != plan.SLODisabled && !p.has {
			c.at(append(at, cue.Str(p.field)), "slo.%s is %s but no bucket of model %q has an estimate to compare targets with, so every bucket would miss every target: give buckets estimates.%s or estimates.learn, or set slo.%s to disabled",
				p.field, p.pref, m.Name, p.estimate, p.field)
		}
	}
}
