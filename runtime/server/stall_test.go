package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity/redistest"
)

// Stalls of the binding store up to 300 ms (a fork, a failover; here DEBUG SLEEP 0.3)
// split no session across replicas with the default timeout_ms and failures_to_down:
// operations wait the stall out instead of binding locally, and no replica goes down,
// which with failures_to_down 1 a single late answer would do.
// Conversations start all through the stalls and alternate between two replicas.
func TestReplicasRideOutStoreStalls(t *testing.T) {
	redis := redistest.Start(t)
	p := sessionPlan()
	// Zero timeout and failure count: the defaults a configuration gets.
	rs := startReplicasWith(t, p, 2, plan.Bindings{Store: plan.BindingsRedis, Address: redis.Addr(), KeyPrefix: "stall:", RetryMS: 50})

	const convs, turns, parallel = 24, 6, 6
	done := make(chan struct{})
	var stalls atomic.Int64
	var stallErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		c := redis.Client()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := c.Do(context.Background(), "DEBUG", "SLEEP", "0.3").Err(); err != nil {
				stallErr = err
				return
			}
			stalls.Add(1)
			// Back-to-back stalls would be one long stall to a queued operation.
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	var failed atomic.Int64
	sem := make(chan struct{}, parallel)
	var convWG sync.WaitGroup
	// At least convs conversations, and as many more as start before the third stall.
	started := 0
	for ; started < convs || stalls.Load() < 3; started++ {
		c := started
		sem <- struct{}{}
		convWG.Go(func() {
			defer func() { <-sem }()
			conv := fmt.Sprintf("conv-%d", c)
			for n := range turns {
				if postTurn(rs.routers[(c+n)%2], conv, n) != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	convWG.Wait()
	close(done)
	wg.Wait()
	if stallErr != nil {
		t.Fatalf("DEBUG SLEEP: %v", stallErr)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d turns failed", failed.Load())
	}
	for c := range started {
		oneEngine(t, rs, p, fmt.Sprintf("conv-%d", c), turns)
	}
	for i, fc := range rs.routers {
		// An operation may still outlast the timeout on a loaded machine: it is answered
		// locally, and the next one goes to the store again.
		st := bindingsStatus(t, fc)
		if !st.Up || st.Downs != 0 {
			t.Errorf("replica %d reports bindings %+v after the stalls; want up, never down", i, st)
		}
		t.Logf("replica %d: %d operations timed out, %d answered locally", i, st.Errors, st.LocalOps)
	}
	t.Logf("%d conversations of %d turns over 2 replicas through %d stalls of 300 ms", started, turns, stalls.Load())
}
