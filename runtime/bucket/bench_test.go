package bucket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/slo"
	"github.com/routerkit/router/runtime/state/load"
)

func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("buckets=%d", n), func(b *testing.B) {
			e := newEnv(b, eng("A", plan.RolePlain))
			buckets := make([]plan.Bucket, n)
			for i := range buckets {
				buckets[i] = plain(fmt.Sprintf("b%03d", i), i64(int64(1024*(i+1))), i64(int64(2048*(i+1))), nil, rr)
			}
			r := e.resolver(buckets...)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Resolve(900, 1800, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// selectionEnv is one model with a small bucket (its engines) and a catch-all bucket, every
// engine with a fresh native report, power-of-two in every group.
func selectionEnv(b testing.TB, pdMode bool, engines int) (*Resolver, *engine.Registry) {
	var ps []plan.Engine
	roles := []plan.Role{plan.RolePlain}
	if pdMode {
		roles = []plan.Role{plan.RolePrefill, plan.RoleDecode}
	}
	for _, role := range roles {
		for i := range engines {
			ps = append(ps, plan.Engine{ID: fmt.Sprintf("%s%03d", role, i), Model: model, Role: role, DPSize: 1,
				Load: plan.LoadSource{StaleAfterMS: 60_000}})
		}
	}
	reg, err := engine.FromPlan(ps)
	if err != nil {
		b.Fatal(err)
	}
	table := load.NewTable(ps, nil) // the monotonic clock serving uses
	for i, e := range ps {
		s := load.Sample{At: time.Now(), Native: true, Running: int64(i % 5), Waiting: int64(i % 3), MaxKVTokens: 1 << 20, MaxRunning: 64}
		if err := table.Update(e.ID, 0, s); err != nil {
			b.Fatal(err)
		}
	}
	p2c := plan.Policy{Type: plan.PowerOfTwo, Admission: plan.Admission{MaxRunningRequests: 64, MaxInflightRequests: 256}}
	build := plain
	if pdMode {
		build = func(id string, maxInput, maxContext *int64, ids []string, p plan.Policy) plan.Bucket {
			return pd(id, maxInput, maxContext, ids, ids, p)
		}
	}
	r, err := NewResolver(plan.Model{Name: model, Buckets: []plan.Bucket{
		build("short", i64(4096), i64(8192), nil, p2c),
		build("long", nil, nil, nil, p2c),
	}}, reg, policy.Deps{Load: table}) // the default randomness serving uses
	if err != nil {
		b.Fatal(err)
	}
	return r, reg
}

func BenchmarkRoute(b *testing.B) {
	for _, tc := range []struct {
		name   string
		pd     bool
		traced bool
		slo    bool // a TTFT target under slo_first, against learned estimates
	}{
		{name: "plain/engines=64"},
		{name: "pd/engines=64+64", pd: true},
		{name: "plain/engines=64/traced", traced: true},
		{name: "plain/engines=64/slo", slo: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r, _ := selectionEnv(b, tc.pd, 64)
			f := &policy.Facts{Model: model, InputTokens: 2000, ExpectedPeak: 3000, PeakKnown: true}
			if tc.slo {
				r.prefs.TTFT, f.SLO.TTFTMS = plan.SLOFirst, 100
				for i, bk := range r.buckets {
					bk.est = slo.NewEstimates(&plan.Estimates{Learn: &plan.Learn{Samples: 256, HalfLifeSecs: 60, MinSamples: 20}}, nil)
					for j := range 256 {
						bk.est.ObserveTTFT(time.Duration(50*(i+1)+j%40) * time.Millisecond)
					}
				}
			}
			ctx := context.Background()
			var pass *policy.Pass
			b.ReportAllocs()
			for b.Loop() {
				if tc.traced {
					pass = &policy.Pass{Trace: &decision.Trace{}}
				}
				if _, err := r.Route(ctx, f, pass); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
