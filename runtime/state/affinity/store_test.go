package affinity

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var k1 = Key{Model: "m", Bucket: "b", Stage: plan.RolePrefill, Value: "s1"}

func TestStoreBindingLifecycle(t *testing.T) {
	c := &clock{now: t0}
	s := NewStore(10*time.Second, c.Now)

	if _, ok := s.Get(k1); ok {
		t.Fatal("empty store has a binding")
	}
	if cur, bound := s.CompareAndBind(k1, "", "P1"); !bound || cur != "P1" {
		t.Fatalf("first bind = %q, %v; want P1, true", cur, bound)
	}
	if got, ok := s.Get(k1); !ok || got != "P1" {
		t.Fatalf("Get = %q, %v; want P1", got, ok)
	}

	// The same key in another bucket, stage or model is another binding.
	for _, k := range []Key{
		{Model: "m", Bucket: "b2", Stage: plan.RolePrefill, Value: "s1"},
		{Model: "m", Bucket: "b", Stage: plan.RoleDecode, Value: "s1"},
		{Model: "m2", Bucket: "b", Stage: plan.RolePrefill, Value: "s1"},
	} {
		if _, ok := s.Get(k); ok {
			t.Fatalf("%+v sees the binding of %+v", k, k1)
		}
	}

	// Touch refreshes only a binding to the named engine.
	c.advance(8 * time.Second)
	if s.Touch(k1, "P2") {
		t.Fatal("Touch with another engine succeeded")
	}
	if !s.Touch(k1, "P1") {
		t.Fatal("Touch of the live binding failed")
	}
	c.advance(8 * time.Second) // 16s after binding, 8s after the touch
	if got, ok := s.Get(k1); !ok || got != "P1" {
		t.Fatal("touched binding expired early")
	}

	// Idle longer than the timeout: gone for Get, and a stale old value cannot match.
	c.advance(11 * time.Second)
	if _, ok := s.Get(k1); ok {
		t.Fatal("idle binding still visible")
	}
	if s.Touch(k1, "P1") {
		t.Fatal("Touch revived an expired binding")
	}
	if cur, bound := s.CompareAndBind(k1, "P1", "P3"); bound || cur != "" {
		t.Fatalf("replacing an expired binding as if live = %q, %v; want \"\", false", cur, bound)
	}
	if cur, bound := s.CompareAndBind(k1, "", "P3"); !bound || cur != "P3" {
		t.Fatalf("binding after expiry = %q, %v", cur, bound)
	}
}

func TestStoreCompareAndBindKeepsOthersReplacement(t *testing.T) {
	s := NewStore(time.Minute, nil)
	s.CompareAndBind(k1, "", "P1")
	// Two picks both saw P1 leave their group; the first replacement wins.
	if cur, bound := s.CompareAndBind(k1, "P1", "P2"); !bound || cur != "P2" {
		t.Fatalf("replace = %q, %v", cur, bound)
	}
	if cur, bound := s.CompareAndBind(k1, "P1", "P3"); bound || cur != "P2" {
		t.Fatalf("second replace = %q, %v; want P2, false", cur, bound)
	}
	if cur, bound := s.CompareAndBind(k1, "", "P4"); bound || cur != "P2" {
		t.Fatalf("first-bind over a live binding = %q, %v; want P2, false", cur, bound)
	}
}

func TestStoreConcurrentFirstBindingsConverge(t *testing.T) {
	s := NewStore(time.Minute, nil)
	const n = 64
	results := make([]string, n)
	wrote := make([]bool, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], wrote[i] = s.CompareAndBind(k1, "", string(rune('A'+i%26)))
		})
	}
	close(start)
	wg.Wait()
	writers := 0
	for i := range n {
		if results[i] != results[0] {
			t.Fatalf("pick %d sees %q, pick 0 sees %q", i, results[i], results[0])
		}
		if wrote[i] {
			writers++
		}
	}
	if writers != 1 {
		t.Fatalf("%d picks wrote the first binding, want exactly 1", writers)
	}
	if got, _ := s.Get(k1); got != results[0] {
		t.Fatalf("stored %q, winners saw %q", got, results[0])
	}
}

func TestStoreSweepAndRemoveEngine(t *testing.T) {
	c := &clock{now: t0}
	s := NewStore(10*time.Second, c.Now)
	key := func(v string) Key { return Key{Model: "m", Bucket: "b", Stage: plan.RolePlain, Value: v} }
	s.CompareAndBind(key("old"), "", "A")
	c.advance(6 * time.Second)
	s.CompareAndBind(key("new"), "", "A")
	s.CompareAndBind(key("other"), "", "B")

	if n := s.Sweep(c.Now().Add(5 * time.Second)); n != 1 {
		t.Fatalf("Sweep removed %d, want the one idle binding", n)
	}
	if s.Len() != 2 {
		t.Fatalf("Len = %d after sweep, want 2", s.Len())
	}
	if n := s.RemoveEngine("A"); n != 1 {
		t.Fatalf("RemoveEngine removed %d, want 1", n)
	}
	if _, ok := s.Get(key("new")); ok {
		t.Fatal("binding to a removed engine survived")
	}
	if got, ok := s.Get(key("other")); !ok || got != "B" {
		t.Fatal("RemoveEngine dropped another engine's binding")
	}
}

func TestStoresFromPlan(t *testing.T) {
	c := &clock{now: t0}
	p := &plan.Plan{Models: []plan.Model{
		{Name: "short", SessionIdleSecs: 5, StickyIdleSecs: 50},
		{Name: "long", SessionIdleSecs: 500, StickyIdleSecs: 500},
	}}
	s := FromPlan(p, c.Now)
	if s.Session("nope") != nil || s.Sticky("nope") != nil {
		t.Fatal("stores for a model not in the plan")
	}
	k := Key{Model: "short", Bucket: "b", Stage: plan.RolePlain, Value: "x"}
	s.Session("short").CompareAndBind(k, "", "A")
	s.Sticky("short").CompareAndBind(k, "", "B")
	if got, _ := s.Session("short").Get(k); got != "A" {
		t.Fatal("session and sticky namespaces are not separate")
	}
	c.advance(10 * time.Second)
	if _, ok := s.Session("short").Get(k); ok {
		t.Fatal("session binding outlived the model's session_idle_secs")
	}
	if _, ok := s.Sticky("short").Get(k); !ok {
		t.Fatal("sticky binding expired with the session timeout")
	}
	s.RemoveEngine("B")
	if _, ok := s.Sticky("short").Get(k); ok {
		t.Fatal("Stores.RemoveEngine missed the sticky store")
	}
}

func TestStoresRunSweeps(t *testing.T) {
	// The bubble's clock moves only when every goroutine in it is blocked: the sweep runs
	// exactly at its interval.
	synctest.Test(t, func(t *testing.T) {
		c := &clock{now: t0}
		st := NewStore(time.Second, c.Now)
		s := &Stores{clock: c.Now, models: map[string]modelStores{
			"m": {sessionLocal: st, stickyLocal: NewStore(time.Second, c.Now), sessionEvery: time.Minute, stickyEvery: time.Minute},
		}}
		st.CompareAndBind(k1, "", "A")
		c.advance(2 * time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if st.Len() != 1 {
			t.Fatal("Run swept before its interval")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if st.Len() != 0 {
			t.Fatal("Run did not sweep the idle binding at its interval")
		}
		cancel()
		<-done
	})
}
