package explain

import (
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// TestLeftOut names why each engine of the role is not a candidate.
func TestLeftOut(t *testing.T) {
	reg, err := engine.FromPlan([]plan.Engine{
		{ID: "A", URL: "http://127.0.0.1:1", Model: "m", Role: plan.RolePlain},
		{ID: "B", URL: "http://127.0.0.1:2", Model: "m", Role: plan.RolePlain},
		{ID: "C", URL: "http://127.0.0.1:3", Model: "m", Role: plan.RolePlain},
		{ID: "D", URL: "http://127.0.0.1:4", Model: "m", Role: plan.RolePlain},
		{ID: "P", URL: "http://127.0.0.1:5", Model: "m", Role: plan.RolePrefill, PDCompat: &plan.PDCompat{PageSize: 16}},
		{ID: "D1", URL: "http://127.0.0.1:6", Model: "m", Role: plan.RoleDecode, PDCompat: &plan.PDCompat{PageSize: 32}},
		{ID: "D2", URL: "http://127.0.0.1:7", Model: "m", Role: plan.RoleDecode},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg.Get("B").SetHealthy(false)
	now := time.Now()
	b := engine.NewBreaker(1, time.Hour, func() time.Time { return now })
	b.Failure()
	reg.Get("C").SetBreaker(b)

	got := leftOut(reg, "m", plan.RolePlain, []Candidate{{ID: "A"}}, nil)
	want := []LeftOut{{"B", "down: failing health checks"}, {"C", "circuit breaker open"}, {"D", "not in this group's worker_ids"}}
	if len(got) != len(want) {
		t.Fatalf("leftOut = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("leftOut[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A decode engine the attempt's prefill pick cannot hand its KV cache to says so.
func TestLeftOutIncompatible(t *testing.T) {
	reg, err := engine.FromPlan([]plan.Engine{
		{ID: "P", URL: "http://127.0.0.1:5", Model: "m", Role: plan.RolePrefill, PDCompat: &plan.PDCompat{PageSize: 16}},
		{ID: "D1", URL: "http://127.0.0.1:6", Model: "m", Role: plan.RoleDecode, PDCompat: &plan.PDCompat{PageSize: 32}},
		{ID: "D2", URL: "http://127.0.0.1:7", Model: "m", Role: plan.RoleDecode},
		{ID: "D3", URL: "http://127.0.0.1:8", Model: "m", Role: plan.RoleDecode},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := leftOut(reg, "m", plan.RoleDecode, []Candidate{{ID: "D2"}}, reg.Get("P"))
	want := []LeftOut{{"D1", "cannot receive the KV cache of prefill P: page size 16 is not 32"}, {"D3", "not in this group's worker_ids"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("leftOut = %+v, want %+v", got, want)
	}
}
