package policy

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

func sprint(v any) string { return fmt.Sprint(v) }

func TestLeastLoad(t *testing.T) {
	basic := func(running, waiting int64) *load.Sample { return &load.Sample{Running: running, Waiting: waiting} }
	tests := []struct {
		name       string
		reports    map[string]*load.Sample
		inflight   map[string]int64
		dispatched map[string]int // dispatches after the report
		limits     Limits
		draws      []int
		want       string
		wantReason string
	}{
		{name: "least reported running plus waiting",
			reports: map[string]*load.Sample{"A": basic(5, 1), "B": basic(2, 2), "C": basic(0, 7)},
			want:    "B", wantReason: reasonLeastReported},
		{name: "reported load corrected by dispatches since the report",
			reports:    map[string]*load.Sample{"A": basic(5, 0), "B": basic(2, 0), "C": basic(4, 0)},
			dispatched: map[string]int{"B": 3},
			want:       "C"},
		{name: "reported tie broken by in-flight",
			reports:  map[string]*load.Sample{"A": basic(2, 0), "B": basic(1, 1), "C": basic(9, 0)},
			inflight: map[string]int64{"A": 2, "B": 1},
			want:     "B"},
		{name: "any missing report: all by in-flight",
			reports:  map[string]*load.Sample{"A": basic(0, 0), "B": basic(50, 50)},
			inflight: map[string]int64{"A": 3, "B": 1, "C": 2},
			want:     "B", wantReason: reasonLeastInflight},
		{name: "remaining ties are drawn uniformly",
			reports: map[string]*load.Sample{"A": basic(1, 0), "B": basic(1, 0), "C": basic(1, 0)},
			draws:   []int{1}, // one draw over the three tied engines, in id order

			want: "B"},
		{name: "rejected engines are skipped",
			reports:  map[string]*load.Sample{"A": basic(0, 0), "B": basic(3, 0), "C": basic(5, 0)},
			limits:   Limits{MaxWaitingRequests: 1, MaxInflightRequests: 1},
			inflight: map[string]int64{"A": 1},
			want:     "B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, plan.RolePlain, "A", "B", "C")
			for id, s := range tt.reports {
				f.report(id, *s)
			}
			for id, n := range tt.dispatched {
				for range n {
					f.table.Acquire(f.w(id)) // never released: still counted as dispatched
				}
			}
			for id, n := range tt.inflight {
				f.inflight(id, n)
			}
			rnd := script(t, tt.draws...)
			pick, err := NewLeastLoad(f.table, rnd, tt.limits).Pick(context.Background(), f.workers, request(plan.RolePlain))
			if err != nil {
				t.Fatal(err)
			}
			if pick.Engine != f.w(tt.want) {
				t.Fatalf("picked %s, want %s", pick.Engine.ID(), tt.want)
			}
			if tt.wantReason != "" && pick.Reason != tt.wantReason {
				t.Errorf("reason = %q, want %q", pick.Reason, tt.wantReason)
			}
		})
	}
}

func TestLeastLoadNoAdmissibleEngine(t *testing.T) {
	f := newFleet(t, plan.RoleDecode, "A", "B")
	f.inflight("A", 2)
	f.inflight("B", 2)
	_, err := NewLeastLoad(f.table, script(t), Limits{MaxInflightRequests: 2}).Pick(context.Background(), f.workers, request(plan.RoleDecode))
	var na *NoAdmissibleEngine
	if !errors.As(err, &na) || len(na.Rejections) != 2 {
		t.Fatalf("err = %v, want NoAdmissibleEngine with both rejections", err)
	}
}

func TestLeastLoadNoCandidates(t *testing.T) {
	_, err := NewLeastLoad(nil, script(t), Limits{}).Pick(context.Background(), nil, request(plan.RolePlain))
	var nc *NoCandidates
	if !errors.As(err, &nc) {
		t.Fatalf("err = %v, want NoCandidates", err)
	}
}
