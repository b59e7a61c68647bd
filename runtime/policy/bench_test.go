package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// benchFleet is n decode engines, each with a fresh native report, on the real clock.
func benchFleet(b *testing.B, n int) (*load.Table, []*engine.Worker) {
	engines := make([]plan.Engine, n)
	workers := make([]*engine.Worker, n)
	for i := range engines {
		engines[i] = plan.Engine{ID: fmt.Sprintf("D%04d", i), Model: "m", Role: plan.RoleDecode, DPSize: 1,
			Load: plan.LoadSource{StaleAfterMS: 60_000}}
		workers[i] = engine.New(engines[i])
	}
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
