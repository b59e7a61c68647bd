package affinity

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/state/affinity/redistest"
)

// fakeClock is a settable clock for the claims' ages; Redis expires keys on its own
// clock, which the test does not wait for.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestPrefixClaimsAreSharedAndAge(t *testing.T) {
	rs := redistest.Start(t)
	clk := &fakeClock{t: time.Now()}
	ra := NewRemote(planBindings(rs.Addr()), clk.now)
	rb := NewRemote(planBindings(rs.Addr()), clk.now)
	t.Cleanup(func() { ra.client.Close(); rb.client.Close() })
	a, b := NewPrefixes(ra, time.Minute), NewPrefixes(rb, time.Minute)

	a.Claim("E1", []int64{10, 20, -30})
	b.Claim("E2", []int64{10})
	got, ok := b.Holders([]int64{10, 20, -30, 40})
	if !ok {
		t.Fatal("the store did not answer")
	}
	for _, h := range got {
		slices.Sort(h)
	}
	want := [][]string{{"E1", "E2"}, {"E1"}, {"E1"}, nil}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("Holders = %v, want %v", got, want)
	}

	// A failed dispatch withdraws its claims, and only its engine's.
	a.Unclaim("E1", []int64{10})
	if got, _ := a.Holders([]int64{10, 20}); !slices.Equal(got[0], []string{"E2"}) || !slices.Equal(got[1], []string{"E1"}) {
		t.Fatalf("after E1 withdrew checkpoint 10: %v", got)
	}

	// A claim older than the lifetime is ignored, though the key lives on through a
	// newer claim of another engine.
	clk.t = clk.t.Add(50 * time.Second)
	b.Claim("E2", []int64{20})
	clk.t = clk.t.Add(20 * time.Second)
	if got, _ := a.Holders([]int64{20}); !slices.Equal(got[0], []string{"E2"}) {
		t.Fatalf("70 s after E1's claim with a 60 s lifetime: holders %v, want E2 only", got[0])
	}
	// The store expires a key a lifetime after its last claim.
	ttl, err := rs.Client().PTTL(context.Background(), a.key(20)).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("PTTL of a claimed key = %v, %v; want at most the 60 s lifetime", ttl, err)
	}
}

// TestPrefixClaimsFollowTheStore: failed lookups mark the store down for bindings too;
// while it is down, lookups answer "no answer" at once and claims are dropped.
func TestPrefixClaimsFollowTheStore(t *testing.T) {
	rs := redistest.Start(t)
	r := NewRemote(planBindings(rs.Addr()), nil)
	t.Cleanup(func() { r.client.Close() })
	p := NewPrefixes(r, time.Minute)
	p.Claim("E1", []int64{1})
	rs.Stop()
	// Failed lookups mark the store down, as failed binding operations do.
	for range 20 {
		if _, ok := p.Holders([]int64{1}); ok {
			t.Fatal("a stopped store answered")
		}
		if !r.Up() {
			break
		}
	}
	if r.Up() {
		t.Fatal("20 failed lookups left the store up")
	}
	before := r.Status().LocalOps
	p.Claim("E1", []int64{2})
	if _, ok := p.Holders([]int64{1}); ok || r.Status().LocalOps != before+2 {
		t.Fatalf("while down: local ops %d → %d, want both operations answered locally", before, r.Status().LocalOps)
	}
	rs.Restart()
	if err := r.Probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, ok := p.Holders([]int64{1}); !ok || got[0] != nil {
		t.Fatalf("a restarted empty store: %v, %v; want an answer with no holder", got, ok)
	}
}
