//go:build !race

// The race detector makes sync.Pool drop items at random, so allocation counts are only
// meaningful without it.

package bucket

import (
	"context"
	"testing"

	"github.com/routerkit/router/runtime/policy"
)

// TestRouteDoesNotAllocate pins the promise of package decision: without a trace in the
// pass, a successful selection pass allocates nothing, including the health filter's
// pooled buffer when a member is unhealthy.
func TestRouteDoesNotAllocate(t *testing.T) {
	for _, pdMode := range []bool{false, true} {
		r, reg := selectionEnv(t, pdMode, 64)
		for _, id := range []string{"plain003", "prefill003", "decode003"} {
			if w := reg.Get(id); w != nil {
				w.SetHealthy(false)
			}
		}
		f := &policy.Facts{Model: model, InputTokens: 2000, ExpectedPeak: 3000, PeakKnown: true}
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
