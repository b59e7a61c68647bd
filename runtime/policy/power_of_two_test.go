package policy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

func TestPowerOfTwoComparison(t *testing.T) {
	stale := native(0, 0, 0, 0, 1000)
	stale.At = t0.Add(-2 * time.Second)
	invalidCapacity := native(0, 0, 0, 0, 0)
	tests := []struct {
		name     string
		stage    plan.Role
		a, b     *load.Sample // nil: no report
		inflA    int64
		inflB    int64
		want     string // "A", "B", or "first" for the first sample in either order
		wantNote string
	}{
		{name: "fewer waiting uncached tokens", stage: plan.RolePrefill,
			a: ptr(native(9, 9, 10, 0, 1000)), b: ptr(native(0, 0, 20, 0, 1000)), want: "A", wantNote: reasonLowerPressure},
		{name: "queue time first when both have it", stage: plan.RolePrefill,
			a: ptr(withQueue(native(0, 0, 10, 0, 1000), 50)), b: ptr(withQueue(native(0, 0, 100, 0, 1000), 20)), want: "B"},
		{name: "queue time ignored when one lacks it", stage: plan.RolePrefill,
			a: ptr(withQueue(native(0, 0, 10, 0, 1000), 50)), b: ptr(native(0, 0, 100, 0, 1000)), want: "A"},
		{name: "then waiting requests", stage: plan.RolePlain,
			a: ptr(native(0, 3, 10, 0, 1000)), b: ptr(native(9, 1, 10, 0, 1000)), want: "B"},
		{name: "then running requests", stage: plan.RolePlain,
			a: ptr(native(2, 1, 10, 0, 1000)), b: ptr(native(3, 1, 10, 0, 1000)), want: "A"},
		{name: "prefill ignores kv occupancy", stage: plan.RolePrefill,
			a: ptr(native(1, 1, 10, 900, 1000)), b: ptr(native(1, 1, 10, 100, 1000)), want: "first"},
		{name: "decode compares waiting first", stage: plan.RoleDecode,
			a: ptr(native(10, 1, 0, 900, 1000)), b: ptr(native(0, 2, 0, 0, 1000)), want: "A"},
		{name: "decode then running", stage: plan.RoleDecode,
			a: ptr(native(5, 1, 0, 0, 1000)), b: ptr(native(4, 1, 0, 900, 1000)), want: "B"},
		{name: "decode then kv usage fraction", stage: plan.RoleDecode,
			a: ptr(native(4, 1, 0, 500, 1000)), b: ptr(native(4, 1, 0, 600, 2000)), want: "B"},
		{name: "decode then used kv tokens", stage: plan.RoleDecode,
			a: ptr(native(4, 1, 0, 100, 1000)), b: ptr(native(4, 1, 0, 200, 2000)), want: "A"},
		{name: "decode ignores uncached tokens", stage: plan.RoleDecode,
			a: ptr(native(4, 1, 5000, 100, 1000)), b: ptr(native(4, 1, 0, 100, 1000)), want: "first"},
		{name: "reported tie broken by in-flight", stage: plan.RolePrefill,
			a: ptr(native(1, 1, 10, 0, 1000)), b: ptr(native(1, 1, 10, 0, 1000)), inflA: 2, inflB: 1, want: "B", wantNote: reasonReportedTie},
		{name: "complete tie keeps the first sample", stage: plan.RoleDecode,
			a: ptr(native(1, 1, 10, 5, 1000)), b: ptr(native(1, 1, 10, 5, 1000)), inflA: 1, inflB: 1, want: "first", wantNote: reasonFirstSampleOnTie},
		{name: "missing report: both by in-flight", stage: plan.RolePrefill,
			a: ptr(native(50, 50, 5000, 0, 1000)), inflA: 1, inflB: 3, want: "A", wantNote: reasonNoNativeReport},
		{name: "basic report: both by in-flight", stage: plan.RolePrefill,
			a: ptr(native(50, 50, 5000, 0, 1000)), b: &load.Sample{Running: 0, Waiting: 0}, inflA: 1, inflB: 3, want: "A"},
		{name: "stale report: both by in-flight", stage: plan.RoleDecode,
			a: ptr(native(50, 50, 0, 0, 1000)), b: &stale, inflA: 1, inflB: 3, want: "A"},
		{name: "no valid capacity: both by in-flight", stage: plan.RoleDecode,
			a: ptr(native(50, 50, 0, 0, 1000)), b: &invalidCapacity, inflA: 1, inflB: 3, want: "A"},
		{name: "no reports and equal in-flight keeps the first sample", stage: plan.RolePlain, want: "first", wantNote: reasonInflightTie},
	}
	for _, tt := range tests {
		for _, order := range []string{"AB", "BA"} {
			t.Run(tt.name+"/"+order, func(t *testing.T) {
				f := newFleet(t, tt.stage, "A", "B")
				if tt.a != nil {
					f.report("A", *tt.a)
				}
				if tt.b != nil {
					f.report("B", *tt.b)
				}
				f.inflight("A", tt.inflA)
				f.inflight("B", tt.inflB)
				// Engines are sorted A, B. Draws (0, 0) sample A then B; (1, 0) sample B then A.
				rnd := script(t, 0, 0)
				if order == "BA" {
					rnd = script(t, 1, 0)
				}
				pass, group := traced()
				pick, err := NewPowerOfTwo(f.table, rnd, Limits{}).Pick(context.Background(), f.workers, in(pass, request(tt.stage)))
				if err != nil {
					t.Fatal(err)
				}
				want := tt.want
				if want == "first" {
					want = order[:1]
				}
				if pick.Engine != f.w(want) {
					t.Fatalf("picked %s, want %s", pick.Engine.ID(), want)
				}
				if tt.wantNote != "" && pick.Reason != tt.wantNote {
					t.Errorf("reason = %q, want %q", pick.Reason, tt.wantNote)
				}
				if got := fmt.Sprint(observedIDs(group())); got != fmt.Sprint([]string{order[:1], order[1:]}) {
					t.Errorf("observed %s, want the samples in draw order %s", got, order)
				}
			})
		}
	}
}

func ptr[T any](v T) *T { return &v }

func withQueue(s load.Sample, ms float64) load.Sample {
	s.QueueMS, s.HasQueueMS = ms, true
	return s
}

// TestPowerOfTwoSamplesDistinctPairsUniformly drives every pair of draws and checks that
// each maps to a different ordered pair of distinct engines: the 4*3 draw outcomes cover
// the 12 ordered pairs exactly once, which is uniform sampling without replacement.
func TestPowerOfTwoSamplesDistinctPairsUniformly(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B", "C", "D")
	seen := map[string]bool{}
	for i := range 4 {
		for j := range 3 {
			pass, group := traced()
			if _, err := NewPowerOfTwo(f.table, script(t, i, j), Limits{}).Pick(context.Background(), f.workers, in(pass, request(plan.RolePlain))); err != nil {
				t.Fatal(err)
			}
			obs := observedIDs(group())
			if len(obs) != 2 || obs[0] == obs[1] {
				t.Fatalf("draws (%d, %d) sampled %v, want two distinct engines", i, j, obs)
			}
			seen[obs[0]+obs[1]] = true
		}
	}
	if len(seen) != 12 {
		t.Fatalf("draws covered %d ordered pairs, want 12: %v", len(seen), seen)
	}
}

func TestPowerOfTwoNoCandidates(t *testing.T) {
	f := newFleet(t, plan.RoleDecode)
	pass, group := traced()
	_, err := NewPowerOfTwo(f.table, script(t), Limits{MaxInflightRequests: 1}).Pick(context.Background(), nil, in(pass, request(plan.RoleDecode)))
	var nc *NoCandidates
	if !errors.As(err, &nc) || nc.Stage != plan.RoleDecode {
		t.Fatalf("err = %v, want NoCandidates for decode", err)
	}
	if g := group(); len(g.Admission) != 0 || len(g.Observed) != 0 {
		t.Fatalf("no candidates still read load or ran admission: %+v", g)
	}
}

func TestPowerOfTwoSingleCandidate(t *testing.T) {
	tests := []struct {
		name    string
		running int64
		wantErr bool
	}{
		{name: "admitted directly", running: 63},
		{name: "its load is read for admission", running: 64, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, plan.RoleDecode, "A")
			f.report("A", native(tt.running, 0, 0, 0, 1000))
			pass, group := traced()
			pick, err := NewPowerOfTwo(f.table, script(t), Limits{MaxRunningRequests: 64}).Pick(context.Background(), f.workers, in(pass, request(plan.RoleDecode)))
			if got := observedIDs(group()); len(got) != 1 || got[0] != "A" {
				t.Errorf("observed %v, want [A]", got)
			}
			if tt.wantErr {
				var rej *AdmissionRejected
				if !errors.As(err, &rej) || rej.Limit != LimitRunning {
					t.Fatalf("err = %v, want AdmissionRejected by %s", err, LimitRunning)
				}
				return
			}
			if err != nil || pick.Engine != f.w("A") || pick.Reason != reasonOnlyCandidate {
				t.Fatalf("Pick = %+v, %v; want A as the only candidate", pick, err)
			}
		})
	}
}

// TestPowerOfTwoAdmissionOnceWithoutResample sets up the chosen engine to fail admission
// while the other sample would pass: the policy must return the rejection, having drawn
// exactly two samples and checked admission once.
func TestPowerOfTwoAdmissionOnceWithoutResample(t *testing.T) {
	f := newFleet(t, plan.RolePrefill, "A", "B", "C")
	f.report("A", native(0, 5, 0, 0, 1000))   // fewer uncached tokens: wins, but waiting == cap
	f.report("B", native(0, 0, 100, 0, 1000)) // admissible
	rnd := script(t, 0, 0)                    // samples A then B
	pass, group := traced()
	_, err := NewPowerOfTwo(f.table, rnd, Limits{MaxWaitingRequests: 5}).Pick(context.Background(), f.workers, in(pass, request(plan.RolePrefill)))
	var rej *AdmissionRejected
	if !errors.As(err, &rej) || rej.Engine != f.w("A") || rej.Limit != LimitWaiting || rej.Value != 5 || rej.Cap != 5 {
		t.Fatalf("err = %v, want A rejected by %s at 5/5", err, LimitWaiting)
	}
	if rnd.calls != 2 {
		t.Errorf("drew %d random numbers, want 2 (no resample)", rnd.calls)
	}
	if v := group().Admission; len(v) != 1 || v[0].Engine != "A" || v[0].Admitted {
		t.Errorf("admission verdicts = %+v, want exactly one rejection of A", v)
	}
}
