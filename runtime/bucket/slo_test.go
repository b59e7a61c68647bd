package bucket

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/slo"
)

func f64(v float64) *float64 { return &v }

func withEstimates(b plan.Bucket, ttftMS, tps *float64) plan.Bucket {
	b.Estimates = &plan.Estimates{TTFTMS: ttftMS, TPS: tps}
	return b
}

// sloBuckets are four plain buckets in the design's order short, fast, none, slow (by input
// capacity), each with its own engine: short meets TTFT targets from 300 ms, fast from 80
// ms with 20 tokens/s, none has no estimate, slow meets TTFT from 500 ms and 60 tokens/s.
func sloBuckets(t *testing.T, prefs plan.SLOPreferences) (*env, *Resolver) {
	e := newEnv(t, eng("S", plan.RolePlain), eng("F", plan.RolePlain), eng("N", plan.RolePlain), eng("L", plan.RolePlain))
	m := plan.Model{Name: model, SLO: prefs, Buckets: []plan.Bucket{
		withEstimates(plain("slow", nil, nil, []string{"L"}, rr), f64(500), f64(60)),
		plain("none", i64(16384), nil, []string{"N"}, rr),
		withEstimates(plain("fast", i64(8192), nil, []string{"F"}, rr), f64(80), f64(20)),
		withEstimates(plain("short", i64(4096), nil, []string{"S"}, rr), f64(300), nil),
	}}
	r, err := NewResolver(m, e.reg, policy.Deps{Load: e.table})
	if err != nil {
		t.Fatal(err)
	}
	return e, r
}

// The order of the compatible buckets under each preference: a missed best_effort target
// is one penalty, a missed slo_first target two, so buckets meeting the slo_first targets
// come first whatever the best_effort ones say; buckets of equal penalty keep capacity,
// rank and id order. Without a target, or with its
// preference disabled, the order is the design's.
func TestSLOOrder(t *testing.T) {
	first, best, off := plan.SLOFirst, plan.SLOBestEffort, plan.SLODisabled
	design := []string{"short", "fast", "none", "slow"}
	for _, tc := range []struct {
		name     string
		ttft     string
		tps      string
		targets  slo.Targets
		input    int64
		want     []string
		penalty  []int
		selected string // SLOTTFT of the selection
	}{
		{name: "preferences disabled ignore targets", ttft: off, tps: off, targets: slo.Targets{TTFTMS: 100, TPS: 50}, want: design},
		{name: "no target keeps the design order", ttft: first, tps: first, want: design},
		{name: "slo_first: the one bucket meeting the target first", ttft: first, tps: off, targets: slo.Targets{TTFTMS: 100},
			want: []string{"fast", "short", "none", "slow"}, penalty: []int{0, 2, 2, 2}, selected: SLOMet},
		{name: "slo_first: every bucket meeting it keeps its order", ttft: first, tps: off, targets: slo.Targets{TTFTMS: 400},
			want: []string{"short", "fast", "none", "slow"}, penalty: []int{0, 0, 2, 2}, selected: SLOMet},
		{name: "slo_first: estimate equal to the target meets it", ttft: first, tps: off, targets: slo.Targets{TTFTMS: 80},
			want: []string{"fast", "short", "none", "slow"}, penalty: []int{0, 2, 2, 2}, selected: SLOMet},
		{name: "best_effort: one penalty for a bucket missing the target", ttft: best, tps: off, targets: slo.Targets{TTFTMS: 100},
			want: []string{"fast", "short", "none", "slow"}, penalty: []int{0, 1, 1, 1}, selected: SLOMet},
		{name: "two slo_first targets: a tier per unmet one", ttft: first, tps: first, targets: slo.Targets{TTFTMS: 100, TPS: 50},
			want: []string{"fast", "slow", "short", "none"}, penalty: []int{2, 2, 4, 4}, selected: SLOMet},
		{name: "two best_effort targets: one penalty per unmet one", ttft: best, tps: best, targets: slo.Targets{TTFTMS: 100, TPS: 50},
			want: []string{"fast", "slow", "short", "none"}, penalty: []int{1, 1, 2, 2}, selected: SLOMet},
		{name: "slo_first TTFT outranks best_effort TPS", ttft: first, tps: best, targets: slo.Targets{TTFTMS: 100, TPS: 50},
			want: []string{"fast", "slow", "short", "none"}, penalty: []int{1, 2, 3, 3}, selected: SLOMet},
		{name: "slo_first TPS outranks best_effort TTFT", ttft: best, tps: first, targets: slo.Targets{TTFTMS: 100, TPS: 50},
			want: []string{"slow", "fast", "short", "none"}, penalty: []int{1, 2, 3, 3}, selected: SLOMissed},
		{name: "TPS target only", ttft: first, tps: first, targets: slo.Targets{TPS: 30},
			want: []string{"slow", "short", "fast", "none"}, penalty: []int{0, 2, 2, 2}},
		{name: "length filters before ordering", ttft: first, tps: off, targets: slo.Targets{TTFTMS: 400}, input: 5000,
			want: []string{"fast", "none", "slow"}, penalty: []int{0, 2, 2}, selected: SLOMet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := sloBuckets(t, plan.SLOPreferences{TTFT: tc.ttft, TPS: tc.tps})
			f := facts(tc.input)
			f.SLO = tc.targets
			pass, tr := traced()
			sel, err := r.Route(context.Background(), f, pass)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tr.Resolved, tc.want) {
				t.Fatalf("try order %v, want %v", tr.Resolved, tc.want)
			}
			if sel.Bucket.ID() != tc.want[0] || tr.Attempts[0].Bucket != tc.want[0] {
				t.Errorf("selected %s, want the first in order, %s", sel.Bucket.ID(), tc.want[0])
			}
			var ranked []string
			var penalty []int
			for _, x := range tr.SLO {
				ranked, penalty = append(ranked, x.Bucket), append(penalty, x.Penalty)
			}
			if tc.penalty == nil {
				if len(tr.SLO) != 0 {
					t.Errorf("a pass SLO ordering does not apply to recorded ranks %+v", tr.SLO)
				}
			} else if !slices.Equal(ranked, tc.want) || !slices.Equal(penalty, tc.penalty) {
				t.Errorf("ranks %v penalties %v, want %v %v", ranked, penalty, tc.want, tc.penalty)
			}
			if sel.SLOTTFT != tc.selected {
				t.Errorf("SLOTTFT = %q, want %q", sel.SLOTTFT, tc.selected)
			}
		})
	}
}

// A bucket's check records its estimate, where it came from and whether it penalized.
func TestSLOChecksInTrace(t *testing.T) {
	_, r := sloBuckets(t, plan.SLOPreferences{TTFT: plan.SLOFirst, TPS: plan.SLOBestEffort})
	f := facts(1)
	f.SLO = slo.Targets{TTFTMS: 100, TPS: 50}
	pass, tr := traced()
	if _, err := r.Route(context.Background(), f, pass); err != nil {
		t.Fatal(err)
	}
	var none decision.SLORank
	for _, x := range tr.SLO {
		if x.Bucket == "none" {
			none = x
		}
	}
	want := []decision.SLOCheck{
		{Target: TargetTTFT, Want: 100, Preference: plan.SLOFirst, Source: slo.SourceNone, Met: false, Penalized: true},
		{Target: TargetTPS, Want: 50, Preference: plan.SLOBestEffort, Source: slo.SourceNone, Met: false, Penalized: true},
	}
	if !slices.Equal(none.Checks, want) {
		t.Errorf("checks of the bucket without estimates: %+v, want %+v", none.Checks, want)
	}
}

// Ordering never breaks fall-through: when the bucket meeting the target has no engine, the
// next bucket in order serves, and the selection says it misses the target.
func TestSLOOrderFallsThrough(t *testing.T) {
	e, r := sloBuckets(t, plan.SLOPreferences{TTFT: plan.SLOFirst, TPS: plan.SLODisabled})
	e.w("F").SetHealthy(false)
	f := facts(1)
	f.SLO = slo.Targets{TTFTMS: 100}
	pass, tr := traced()
	sel, err := r.Route(context.Background(), f, pass)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Bucket.ID() != "short" || len(tr.Attempts) != 2 || tr.Attempts[0].Bucket != "fast" || sel.SLOTTFT != SLOMissed {
		t.Fatalf("selected %s (SLOTTFT %q) after attempts %+v; want fast tried, short selected, target missed", sel.Bucket.ID(), sel.SLOTTFT, tr.Attempts)
	}
}

// A learned estimate replaces the configured one once enough recent samples exist, and
// the order follows it; the clock comes from the policy dependencies.
func TestSLOOrderFollowsLearnedEstimates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newEnv(t, eng("A", plan.RolePlain), eng("B", plan.RolePlain))
	learn := &plan.Learn{Samples: 16, HalfLifeSecs: 60, MinSamples: 3}
	m := plan.Model{Name: model, SLO: plan.SLOPreferences{TTFT: plan.SLOFirst, TPS: plan.SLODisabled}, Buckets: []plan.Bucket{
		{ID: "a", Limits: plan.Limits{Max: i64(10)}, Estimates: &plan.Estimates{TTFTMS: f64(50), Learn: learn},
			Groups: plan.Groups{Plain: &plan.Group{WorkerIDs: []string{"A"}, Policy: rr}}},
		{ID: "b", Estimates: &plan.Estimates{TTFTMS: f64(500), Learn: learn},
			Groups: plan.Groups{Plain: &plan.Group{WorkerIDs: []string{"B"}, Policy: rr}}},
	}}
	r, err := NewResolver(m, e.reg, policy.Deps{Load: e.table, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	route := func() string {
		f := facts(1)
		f.SLO = slo.Targets{TTFTMS: 100}
		sel, err := r.Route(context.Background(), f, nil)
		if err != nil {
			t.Fatal(err)
		}
		return sel.Bucket.ID()
	}
	if got := route(); got != "a" {
		t.Fatalf("with configured estimates, selected %s, want a", got)
	}
	for _, b := range r.buckets {
		for range 4 {
			if b.id == "a" {
				b.Estimates().ObserveTTFT(400 * time.Millisecond)
			} else {
				b.Estimates().ObserveTTFT(90 * time.Millisecond)
			}
		}
	}
	now = now.Add(time.Second) // new samples count a moment after they arrive
	if got := route(); got != "b" {
		t.Fatalf("after a turned slow and b fast, selected %s, want b", got)
	}
	now = now.Add(10 * time.Minute) // ten half-lives: the samples fade, configured again
	if got := route(); got != "a" {
		t.Fatalf("after the samples faded, selected %s, want a", got)
	}
}

// pdCompatEnv is a PD bucket "mixed" whose prefill P1 speaks mooncake and whose decode
// engines are D1 (nixl) and D2 (mooncake), then a bucket "fallback" of its own.
func pdCompatEnv(t *testing.T) (*env, *Resolver) {
	mooncake, nixl := &plan.PDCompat{TransferBackend: "mooncake"}, &plan.PDCompat{TransferBackend: "nixl"}
	engines := []plan.Engine{eng("P1", plan.RolePrefill), eng("D1", plan.RoleDecode), eng("D2", plan.RoleDecode),
		eng("P9", plan.RolePrefill), eng("D9", plan.RoleDecode)}
	engines[0].PDCompat, engines[1].PDCompat, engines[2].PDCompat = mooncake, nixl, mooncake
	e := newEnv(t, engines...)
	return e, e.resolver(
		pd("mixed", i64(100), nil, []string{"P1"}, []string{"D1", "D2"}, rr),
		pd("fallback", nil, nil, []string{"P9"}, []string{"D9"}, rr),
	)
}

// Decode candidates are the members that can receive the chosen prefill engine's KV
// cache: round robin over the decode group never gives the incompatible one.
func TestPDCompatFiltersDecodeCandidates(t *testing.T) {
	e, r := pdCompatEnv(t)
	for i := range 6 {
		pass, tr := traced()
		sel, err := r.Route(context.Background(), facts(1), pass)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Bucket.ID() != "mixed" || sel.Decode.Engine != e.w("D2") {
			t.Fatalf("pick %d: bucket %s decode %s, want mixed with D2", i, sel.Bucket.ID(), sel.Decode.Engine.ID())
		}
		g := tr.Attempts[0].Groups[1]
		if len(g.Candidates) != 1 || g.Candidates[0].ID != "D2" || len(g.Notes) != 1 ||
			g.Notes[0] != "left out D1 cannot receive the KV cache of prefill P1: transfer backend mooncake is not nixl" {
			t.Fatalf("decode group trace %+v", g)
		}
	}
}

// With no compatible decode engine available, the bucket fails with the reason and the
// next bucket serves.
func TestPDCompatNoPartnerAdvances(t *testing.T) {
	e, r := pdCompatEnv(t)
	e.w("D2").SetHealthy(false)
	pass, tr := traced()
	sel, err := r.Route(context.Background(), facts(1), pass)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Bucket.ID() != "fallback" {
		t.Fatalf("selected bucket %s, want fallback", sel.Bucket.ID())
	}
	want := "bucket mixed: no eligible decode engine: no member can receive the KV cache of prefill P1 (D1 cannot receive the KV cache of prefill P1: transfer backend mooncake is not nixl)"
	if tr.Attempts[0].Error != want {
		t.Fatalf("first attempt error %q, want %q", tr.Attempts[0].Error, want)
	}

	// Without a trace the failure is the same NoCandidates the bucket loop advances on.
	_, err = r.buckets[0].PickEngines(context.Background(), facts(1), nil)
	var none *policy.NoCandidates
	if !errors.As(err, &none) || none.Stage != plan.RoleDecode || !strings.Contains(none.Why, "transfer backend") {
		t.Fatalf("PickEngines error %v, want NoCandidates for decode with the reason", err)
	}
}
