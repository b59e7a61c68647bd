package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/token"
)

// benchFleet is n decode engines, each with a fresh native report, on the real clock.
// The workers come from the registry as serving builds it.
func benchFleet(b *testing.B, n int) (*load.Table, []*engine.Worker) {
	engines := make([]plan.Engine, n)
	for i := range engines {
		engines[i] = plan.Engine{ID: fmt.Sprintf("D%04d", i), Model: "m", Role: plan.RoleDecode, DPSize: 1,
			Load: plan.LoadSource{StaleAfterMS: 60_000}}
	}
	reg, err := engine.FromPlan(engines)
	if err != nil {
		b.Fatal(err)
	}
	workers := reg.Snapshot().Workers("m", plan.RoleDecode)
	table := load.NewTable(engines, nil) // the monotonic clock serving uses
	for i, e := range engines {
		s := native(int64(i%7), int64(i%3), 0, int64(i*100), 1<<20)
		s.At = time.Now()
		if err := table.Update(e.ID, 0, s); err != nil {
			b.Fatal(err)
		}
	}
	return table, workers
}

func BenchmarkPowerOfTwoPick(b *testing.B) {
	for _, n := range []int{2, 8, 64, 1024} {
		b.Run(fmt.Sprintf("engines=%d", n), func(b *testing.B) {
			table, workers := benchFleet(b, n)
			p := NewPowerOfTwo(table, sharedRand{}, Limits{MaxRunningRequests: 64, MaxKVTokens: 1 << 30, MaxInflightRequests: 1000})
			req := &Request{Facts: Facts{Model: "m", InputTokens: 1000}, Stage: plan.RoleDecode, BucketID: "b"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Pick(ctx, workers, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cacheBench is n prefill engines with fresh native reports and a local index in which
// engine 3 holds a 4096-token prompt, among unrelated blocks of every engine.
func cacheBench(b *testing.B, n int) (*CacheAware, []*engine.Worker, []uint32) {
	engines := make([]plan.Engine, n)
	workers := make([]*engine.Worker, n)
	for i := range engines {
		engines[i] = plan.Engine{ID: fmt.Sprintf("P%04d", i), Model: "m", Role: plan.RolePrefill, DPSize: 1,
			Load: plan.LoadSource{StaleAfterMS: 60_000}, KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}}
		workers[i] = engine.New(engines[i])
	}
	table := load.NewTable(engines, nil)
	for i, e := range engines {
		s := native(int64(i%7), int64(i%3), int64(i*100), 0, 1<<20)
		s.At = time.Now()
		if err := table.Update(e.ID, 0, s); err != nil {
			b.Fatal(err)
		}
	}
	ix := kv.NewIndex(&plan.Plan{Engines: engines})
	prompt := make([]uint32, 4096)
	for i := range prompt {
		prompt[i] = uint32(i * 31)
	}
	ix.Apply(engines[3].ID, 0, kv.Event{Kind: kv.BlockStored, Hashes: token.BlockHashes(prompt, kv.DefaultBlockSize), Medium: kv.MediumGPU})
	for i, e := range engines {
		other := make([]uint32, 1024)
		for j := range other {
			other[j] = uint32(i<<20 + j)
		}
		ix.Apply(e.ID, 0, kv.Event{Kind: kv.BlockStored, Hashes: token.BlockHashes(other, kv.DefaultBlockSize), Medium: kv.MediumGPU})
	}
	cfg := plan.Policy{Type: plan.CacheAware, MinMatchedTokens: new(int64(1024)), CandidateMinWorkers: 8, CandidateRatio: 0.05,
		CandidateMaxWorkers: 32, SwitchMarginTokens: new(int64(1024)), MinLoadChoices: 2,
		PressureGuard: &plan.PressureGuard{Enabled: true, AbsThresholdTokens: 1024, RelThreshold: 1.5}}
	return NewCacheAware(LocalIndex(ix), table, sharedRand{}, Limits{MaxRunningRequests: 64, MaxInflightRequests: 1000}, cfg), workers, prompt
}

// BenchmarkCacheAwarePick is one cache-aware pick of a 4096-token prompt: "hit" finds the
// holder in the local index, "miss" finds none and samples two engines; "memoized" reuses
// the request's lookup, as a second bucket attempt of the same request does.
func BenchmarkCacheAwarePick(b *testing.B) {
	for _, n := range []int{8, 64} {
		for _, tc := range []struct {
			name     string
			miss     bool
			memoized bool
		}{{name: "hit"}, {name: "hit/memoized", memoized: true}, {name: "miss", miss: true}} {
			b.Run(fmt.Sprintf("engines=%d/%s", n, tc.name), func(b *testing.B) {
				p, workers, prompt := cacheBench(b, n)
				if tc.miss {
					prompt = append([]uint32{7}, prompt[1:]...)
				}
				req := &Request{Facts: Facts{Model: "m", InputTokens: int64(len(prompt)), TokenIDs: prompt}, Stage: plan.RolePrefill, BucketID: "b"}
				ctx := context.Background()
				if tc.memoized {
					req.Pass = (*Pass)(nil).Start(true)
				}
				b.ReportAllocs()
				for b.Loop() {
					pick, err := p.Pick(ctx, workers, req)
					if err != nil {
						b.Fatal(err)
					}
					if !tc.miss && pick.Engine != workers[3] {
						b.Fatalf("picked %s", pick.Engine.ID())
					}
				}
			})
		}
	}
}
