package quality

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/compiler"
)

// The SLO fleet compiles, puts the slow bucket first in the design's order, and sets a
// target the fast bucket's estimate meets and the slow one's misses.
func TestSLOPlan(t *testing.T) {
	o := Options{Engines: 4, TimeScale: 0.5, Shape: DefaultShape(), Utilisation: 0.5, Seed: 1}
	p := newSLOPlan(o)
	if p.fast != 2 || p.slow != 2 || p.slowMS <= 7*p.fastMS {
		t.Fatalf("plan %+v: want two engines of each class, slow prefill %dx the fast", p, slowFactor)
	}
	if !(2*p.fastMS <= p.targetMS() && p.targetMS() < 2*p.slowMS) {
		t.Fatalf("target %v ms must lie between the fast estimate %v and the slow one %v", p.targetMS(), 2*p.fastMS, 2*p.slowMS)
	}
	pl, err := compiler.CompileSources([]compiler.Source{{Name: "slo.yaml", Data: p.config("slo_first")}})
	if err != nil {
		t.Fatal(err)
	}
	m := pl.Models[0]
	if m.SLO.TTFT != "slo_first" || m.Buckets[0].ID != "slow" || *m.Buckets[1].Estimates.TTFTMS != 2*p.fastMS {
		t.Fatalf("compiled model %+v", m)
	}
	reqs, rate := p.requests(o)
	if len(reqs) != o.Shape.Requests || rate <= 0 || reqs[0].Class != "tight" || reqs[0].TTFTSLOMS != p.targetMS() || reqs[1].TTFTSLOMS != 0 {
		t.Fatalf("requests: %d at %v/s, first two %+v %+v", len(reqs), rate, reqs[0].Class, reqs[1].Class)
	}
}

// The met share counts tight requests at or under their own target, ignoring failures.
func TestSummarizeSLO(t *testing.T) {
	outs := []Outcome{
		{TTFTSLOMS: 100, TTFT: 100 * time.Millisecond},
		{TTFTSLOMS: 100, TTFT: 101 * time.Millisecond},
		{TTFTSLOMS: 100, TTFT: time.Millisecond, Err: errors.New("status 503")},
		{TTFT: 500 * time.Millisecond},
	}
	r := summarizeSLO("slo_first", outs, []int{3}, []int{3, 1})
	if r.Tight != 2 || r.Relaxed != 1 || r.Errors != 1 || r.TightMet != 0.5 || r.FastShare != 0.75 {
		t.Fatalf("row %+v", r)
	}
	var b strings.Builder
	r.TargetMS = 100
	if err := WriteSLOTable(&b, []SLORow{r}); err != nil || !strings.Contains(b.String(), "| slo_first | 50% of 2 |") {
		t.Fatalf("table %q, %v", b.String(), err)
	}
}
