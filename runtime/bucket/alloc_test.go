//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation counts are only
// meaningful without it.

package bucket

import (
	"context"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/slo"
)

// TestRouteDoesNotAllocate pins the promise of package decision: without a trace in the
// pass, a successful selection pass allocates nothing, including the health filter's
// pooled buffer when a member is unhealthy, and SLO ordering.
func TestRouteDoesNotAllocate(t *testing.T) {
	for _, pdMode := range []bool{false, true} {
		r, reg := selectionEnv(t, pdMode, 64)
		r.prefs = plan.SLOPreferences{TTFT: plan.SLOFirst, TPS: plan.SLOBestEffort}
		for _, id := range []string{"plain003", "prefill003", "decode003"} {
			if w := reg.Get(id); w != nil {
				w.SetHealthy(false)
			}
		}
		f := &policy.Facts{Model: model, InputTokens: 2000, ExpectedPeak: 3000, PeakKnown: true, SLO: slo.Targets{TTFTMS: 100, TPS: 20}}
		ctx := context.Background()
		if _, err := r.Route(ctx, f, nil); err != nil { // warm the member caches and pools
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(200, func() {
			if _, err := r.Route(ctx, f, nil); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("pd=%v: Route allocates %.1f times per pass, want 0", pdMode, n)
		}
	}
}
