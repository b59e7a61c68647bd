package quality

import (
	"math"
	"testing"

	"github.com/routerkit/router/compiler"
)

// quantile interpolates within the bucket the rank falls in, as histogram_quantile: of 10
// observations, 2 under 0.1 s, 8 under 0.2 s and 10 under 0.4 s, the median is at 3/6 of
// the way from 0.1 to 0.2, the 90th percentile half way from 0.2 to 0.4.
func TestQuantile(t *testing.T) {
	bounds := []float64{0.1, 0.2, 0.4, math.Inf(1)}
	counts := []float64{2, 8, 10, 10}
	for _, c := range []struct{ q, want float64 }{{0.5, 0.15}, {0.9, 0.3}, {0.1, 0.05}} {
		if got := quantile(c.q, bounds, counts); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	// Past the last finite bound, the estimate is that bound.
	if got := quantile(0.99, []float64{0.1, math.Inf(1)}, []float64{1, 10}); got != 0.1 {
		t.Errorf("quantile in the +Inf bucket = %v, want 0.1", got)
	}
}

// The overload workload's config compiles, with its queue and admission cap.
func TestOverloadConfig(t *testing.T) {
	p, err := compiler.CompileSources([]compiler.Source{{Name: "overload.yaml", Data: overloadConfig(3, 24)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Queue.Size != 24 || len(p.Engines) != 3 || p.Models[0].Buckets[0].Groups.Plain.Policy.Admission.MaxInflightRequests != overloadInflight {
		t.Errorf("compiled %+v", p.Queue)
	}
}
