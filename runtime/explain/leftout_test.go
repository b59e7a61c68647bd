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
		{ID: "P", URL: "http://127.0.0.1:5", Model: "m", Role: plan.RolePrefill},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg.Get("B").SetHealthy(false)
	now := time.Now()
	b := engine.NewBreaker(1, time.Hour, func() time.Time { return now })
	b.Failure()
	reg.Get("C").SetBreaker(b)

	got := leftOut(reg, "m", plan.RolePlain, []Candidate{{ID: "A"}})
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
