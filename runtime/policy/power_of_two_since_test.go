package policy

import (
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// TestPowerOfTwoCountsDispatchesSinceReport: requests the router sent after an engine's
// last report weigh as waiting requests of the current request's length (100 tokens
// here), so the engine that looked lightest at the last poll does not take every request
// until the next one.
func TestPowerOfTwoCountsDispatchesSinceReport(t *testing.T) {
	tests := []struct {
		name       string
		stage      plan.Role
		a, b       load.Sample
		dispatched map[string]int
		want       string
	}{
		{name: "equal reports, dispatches to A since", stage: plan.RolePlain,
			a: native(1, 0, 0, 0, 1000), b: native(1, 0, 0, 0, 1000), dispatched: map[string]int{"A": 2}, want: "B"},
		{name: "lighter report outweighed by dispatches", stage: plan.RolePrefill,
			a: native(0, 1, 150, 0, 1000), b: native(0, 2, 300, 0, 1000), dispatched: map[string]int{"A": 2}, want: "B"},
		{name: "lighter report still lighter", stage: plan.RolePrefill,
			a: native(0, 1, 50, 0, 1000), b: native(0, 2, 300, 0, 1000), dispatched: map[string]int{"A": 2}, want: "A"},
		{name: "equal corrected tokens, then requests", stage: plan.RolePlain,
			a: native(3, 0, 100, 0, 1000), b: native(1, 0, 200, 0, 1000), dispatched: map[string]int{"A": 1}, want: "B"},
		{name: "queue time not compared once reports lag", stage: plan.RolePrefill,
			a: withQueue(native(0, 0, 0, 0, 1000), 10), b: withQueue(native(0, 0, 0, 0, 1000), 90), dispatched: map[string]int{"A": 1}, want: "B"},
		{name: "decode unaffected", stage: plan.RoleDecode,
			a: native(1, 0, 0, 0, 1000), b: native(2, 0, 0, 0, 1000), dispatched: map[string]int{"A": 3}, want: "A"},
	}
	for _, tt := range tests {
		for _, order := range []string{"AB", "BA"} {
			t.Run(tt.name+"/"+order, func(t *testing.T) {
				f := newFleet(t, tt.stage, "A", "B")
				f.report("A", tt.a)
				f.report("B", tt.b)
				for id, n := range tt.dispatched {
					for range n {
						f.table.Acquire(f.w(id)) // never released: still counted as dispatched
					}
				}
				rnd := script(t, 0, 0)
				if order == "BA" {
					rnd = script(t, 1, 0)
				}
				pick, err := NewPowerOfTwo(f.table, rnd, Limits{}).Pick(t.Context(), f.workers, request(tt.stage))
				if err != nil {
					t.Fatal(err)
				}
				if pick.Engine != f.w(tt.want) {
					t.Fatalf("picked %s, want %s", pick.Engine.ID(), tt.want)
				}
			})
		}
	}
}

// TestPressureCountsDispatchesSinceReport: the cache-aware policy's set comparisons
// correct reports the same way, and drop queue time once a report lags.
func TestPressureCountsDispatchesSinceReport(t *testing.T) {
	f := newFleet(t, plan.RolePrefill, "A", "B")
	f.report("A", withQueue(native(0, 1, 150, 0, 1000), 10))
	f.report("B", withQueue(native(0, 2, 300, 0, 1000), 90))
	look := func() []obs {
		now := f.table.Now()
		return []obs{observe(nil, f.table, f.w("A"), now), observe(nil, f.table, f.w("B"), now)}
	}
	os := look()
	if p := levelOf(os, 100); p.lv != byQueueTime || p.compare(&os[0], &os[1]) >= 0 {
		t.Fatalf("current reports: level %v, A not lighter", p.lv)
	}
	f.table.Acquire(f.w("A"))
	f.table.Acquire(f.w("A")) // A: 150 + 2*100 tokens against B's 300
	os = look()
	p := levelOf(os, 100)
	if p.lv != byReport {
		t.Fatalf("level %v, want byReport once a report lags", p.lv)
	}
	if p.compare(&os[0], &os[1]) <= 0 {
		t.Fatal("A should weigh more than B after two dispatches of 100 tokens")
	}
	if p := levelOf(os, 10); p.compare(&os[0], &os[1]) >= 0 {
		t.Fatal("with 10-token requests A is still lighter")
	}
}
