package affinity

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity/redistest"
)

// replica is one router's view of a shared store: its own connection and local copy.
func replica(t *testing.T, addr string, idle time.Duration) (*Remote, *Shared) {
	t.Helper()
	r := NewRemote(planBindings(addr), nil)
	t.Cleanup(func() { r.client.Close() })
	return r, NewShared(r, NewStore(idle, nil), "session")
}

func TestSharedReplicasReuseOneBinding(t *testing.T) {
	rs := redistest.Start(t)
	_, a := replica(t, rs.Addr(), time.Minute)
	_, b := replica(t, rs.Addr(), time.Minute)

	if _, ok := b.Get(k1); ok {
		t.Fatal("empty store has a binding")
	}
	if cur, bound := a.CompareAndBind(k1, "", "P1"); !bound || cur != "P1" {
		t.Fatalf("A's first bind = %q, %v; want P1, true", cur, bound)
	}
	if got, ok := b.Get(k1); !ok || got != "P1" {
		t.Fatalf("B sees %q, %v; want A's P1", got, ok)
	}
	if cur, bound := b.CompareAndBind(k1, "", "P2"); bound || cur != "P1" {
		t.Fatalf("B's first bind over A's = %q, %v; want P1, false", cur, bound)
	}
	if b.Touch(k1, "P2") || !b.Touch(k1, "P1") {
		t.Fatal("Touch refreshed another engine or not the bound one")
	}
	// A replacement of a binding that left its group keeps the first replacement.
	if cur, bound := b.CompareAndBind(k1, "P1", "P3"); !bound || cur != "P3" {
		t.Fatalf("B's replace = %q, %v", cur, bound)
	}
	if cur, bound := a.CompareAndBind(k1, "P1", "P4"); bound || cur != "P3" {
		t.Fatalf("A's stale replace = %q, %v; want P3, false", cur, bound)
	}
	// Sessions and routing keys are separate namespaces of the same store.
	r, _ := replica(t, rs.Addr(), time.Minute)
	if _, ok := NewShared(r, NewStore(time.Minute, nil), "sticky").Get(k1); ok {
		t.Fatal("the sticky namespace sees a session binding")
	}
}

func TestSharedKeysExpireInStoreAndStayBounded(t *testing.T) {
	rs := redistest.Start(t)
	_, a := replica(t, rs.Addr(), 90*time.Second)
	long := Key{Model: "m", Bucket: "b", Stage: plan.RolePlain, Value: strings.Repeat("x", 100_000)}
	a.CompareAndBind(long, "", "E")
	c := rs.Client()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "test:s:m:") || len(keys[0]) > 64 {
		t.Fatalf("keys = %q; want one key under test:s:m: of at most 64 bytes", keys)
	}
	ttl := func() time.Duration {
		d, err := c.PTTL(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := ttl(); d <= 0 || d > 90*time.Second {
		t.Fatalf("PTTL after bind = %v; want the idle timeout, set by the store", d)
	}
	if err := c.PExpire(ctx, keys[0], time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if !a.Touch(long, "E") {
		t.Fatal("Touch of the bound engine failed")
	}
	if d := ttl(); d <= 0 || d > 90*time.Second {
		t.Fatalf("PTTL after touch = %v; want the idle timeout again", d)
	}
}

func TestSharedConcurrentFirstBindingsConverge(t *testing.T) {
	rs := redistest.Start(t)
	_, a := replica(t, rs.Addr(), time.Minute)
	_, b := replica(t, rs.Addr(), time.Minute)
	const n = 32
	results := make([]string, n)
	wrote := make([]bool, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
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
		t.Fatalf("%d picks on two replicas wrote the first binding, want exactly 1", writers)
	}
}

func TestSharedFallsBackToLocalBindingsAndReturns(t *testing.T) {
	rs := redistest.Start(t)
	ra, a := replica(t, rs.Addr(), time.Minute)
	a.CompareAndBind(k1, "", "P1")

	rs.Stop()
	for range DefaultFailuresToDown {
		if got, ok := a.Get(k1); !ok || got != "P1" {
			t.Fatalf("with the store down A routes %q, %v; want its local copy P1", got, ok)
		}
	}
	st := ra.Status()
	if st.Up || st.Errors == 0 || st.LocalOps == 0 || st.LastError == "" {
		t.Fatalf("status while down = %+v; want down with an error and local operations", st)
	}
	k2 := Key{Model: "m", Bucket: "b", Stage: plan.RolePlain, Value: "during-outage"}
	if cur, bound := a.CompareAndBind(k2, "", "P2"); !bound || cur != "P2" {
		t.Fatalf("local bind while down = %q, %v", cur, bound)
	}
	if err := ra.Probe(context.Background()); err == nil || ra.Up() {
		t.Fatal("probe of a stopped store succeeded")
	}

	rs.Restart() // empty: it lost every key
	if err := ra.Probe(context.Background()); err != nil || !ra.Up() {
		t.Fatalf("probe after restart: %v, up %v", err, ra.Up())
	}
	if _, ok := a.Get(k2); ok {
		t.Fatal("the restarted store has a binding it never got")
	}
	// The policy would place k2 anew; the store is offered the engine k2 kept here.
	if cur, bound := a.CompareAndBind(k2, "", "P9"); bound || cur != "P2" {
		t.Fatalf("first bind after the outage = %q, %v; want the local P2, not written as P9", cur, bound)
	}
	_, b := replica(t, rs.Addr(), time.Minute)
	if got, ok := b.Get(k2); !ok || got != "P2" {
		t.Fatalf("another replica sees %q, %v after recovery; want P2 shared again", got, ok)
	}
}

func TestStoresFromPlanWithRedis(t *testing.T) {
	rs := redistest.Start(t)
	p := &plan.Plan{
		Models:   []plan.Model{{Name: "m", SessionIdleSecs: 60, StickyIdleSecs: 60}},
		Bindings: &plan.Bindings{Store: plan.BindingsRedis, Address: rs.Addr(), KeyPrefix: "r:", TimeoutMS: 500, RetryMS: 1000},
	}
	s := FromPlan(p, nil)
	if _, ok := s.Session("m").(*Shared); !ok {
		t.Fatalf("session bindings are %T, want *Shared", s.Session("m"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	s.Sticky("m").CompareAndBind(k1, "", "E")
	if st := s.Status(); st.Store != "redis" || !st.Up || st.Address != rs.Addr() {
		t.Fatalf("status = %+v", st)
	}
	cancel()
	<-done
	if st := FromPlan(&plan.Plan{}, nil).Status(); st.Store != "memory" || !st.Up {
		t.Fatalf("memory status = %+v", st)
	}
}

func planBindings(addr string) plan.Bindings {
	return plan.Bindings{Store: plan.BindingsRedis, Address: addr, KeyPrefix: "test:", TimeoutMS: 500, RetryMS: 1000}
}

// A store that accepts connections and never answers is down after failures_to_down
// timeouts in a row: each pick gets its local answer, and the change is logged once.
func TestSharedTimeoutMarksStoreDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	cfg := planBindings(ln.Addr().String())
	cfg.TimeoutMS = 50
	r := NewRemote(cfg, nil)
	t.Cleanup(func() { r.client.Close() })
	var logged bytes.Buffer
	r.SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	s := NewShared(r, NewStore(time.Minute, nil), "sticky")

	if cur, bound := s.CompareAndBind(k1, "", "E"); !bound || cur != "E" {
		t.Fatalf("bind against a silent store = %q, %v; want the local bind", cur, bound)
	}
	for range 2 {
		if !r.Up() {
			t.Fatal("the store is down before 3 timeouts in a row")
		}
		if got, ok := s.Get(k1); !ok || got != "E" {
			t.Fatalf("Get against a silent store = %q, %v; want the local E", got, ok)
		}
	}
	if r.Up() {
		t.Fatal("a store that timed out 3 times in a row is still up")
	}
	if got, ok := s.Get(k1); !ok || got != "E" {
		t.Fatalf("Get while down = %q, %v", got, ok)
	}
	if n := strings.Count(logged.String(), "binding store is down"); n != 1 {
		t.Fatalf("logged the change %d times, want once:\n%s", n, logged.String())
	}
	if st := r.Status(); st.Errors != 3 || st.LocalOps != 4 || st.Downs != 1 {
		t.Fatalf("status = %+v; want 3 errors (no operation sent while down), 4 local operations, 1 down", st)
	}
}

// Failures separated by a success never mark the store down: only failures_to_down in a
// row do. Each failure is still answered from the local bindings.
func TestSharedStoreDownOnlyAfterFailuresInARow(t *testing.T) {
	rs := redistest.Start(t)
	r, a := replica(t, rs.Addr(), time.Minute)
	var logged bytes.Buffer
	r.SetLogger(slog.New(slog.NewTextHandler(&logged, nil)))
	a.CompareAndBind(k1, "", "P1")
	failTwice := func() {
		t.Helper()
		rs.Stop()
		for range DefaultFailuresToDown - 1 {
			if got, ok := a.Get(k1); !ok || got != "P1" {
				t.Fatalf("Get with the store stopped = %q, %v; want the local P1", got, ok)
			}
		}
		rs.Restart() // empty
	}
	for range 3 {
		failTwice()
		if !r.Up() {
			t.Fatalf("store down after %d failures in a row, want %d", DefaultFailuresToDown-1, DefaultFailuresToDown)
		}
		// A success: the store lost P1 in its restart, and is offered it back.
		if cur, _ := a.CompareAndBind(k1, "", "P9"); cur != "P1" {
			t.Fatalf("bind after the restart = %q, want the local P1 offered back", cur)
		}
	}
	if st := r.Status(); st.Errors != 6 || st.Downs != 0 || strings.Contains(logged.String(), "down") {
		t.Fatalf("status %+v, log %q; want 6 errors, never down", st, logged.String())
	}
	rs.Stop()
	for range DefaultFailuresToDown {
		a.Get(k1)
	}
	if st := r.Status(); st.Up || st.Downs != 1 {
		t.Fatalf("status %+v after %d failures in a row; want down once", st, DefaultFailuresToDown)
	}
}
