package policy

import (
	"context"
	"errors"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

func TestRandomUsesItsDraw(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B", "C")
	for i, want := range []string{"A", "B", "C"} {
		pick, err := NewRandom(f.table, script(t, i), Limits{}).Pick(context.Background(), f.workers, request(plan.RolePlain))
		if err != nil || pick.Engine != f.w(want) {
			t.Fatalf("draw %d: Pick = %+v, %v; want %s", i, pick, err, want)
		}
	}
}

func TestRandomRejectionIsNotRedrawn(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B")
	f.inflight("B", 3)
	rnd := script(t, 1)
	_, err := NewRandom(f.table, rnd, Limits{MaxInflightRequests: 3}).Pick(context.Background(), f.workers, request(plan.RolePlain))
	var rej *AdmissionRejected
	if !errors.As(err, &rej) || rej.Engine != f.w("B") || rej.Limit != LimitInflight {
		t.Fatalf("err = %v, want B rejected by %s", err, LimitInflight)
	}
	if rnd.calls != 1 {
		t.Errorf("drew %d times, want 1", rnd.calls)
	}
}

func TestRandomNoCandidates(t *testing.T) {
	_, err := NewRandom(nil, script(t), Limits{}).Pick(context.Background(), nil, request(plan.RolePrefill))
	var nc *NoCandidates
	if !errors.As(err, &nc) || nc.Stage != plan.RolePrefill {
		t.Fatalf("err = %v, want NoCandidates for prefill", err)
	}
}
