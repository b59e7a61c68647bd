package policy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity"
)

// hooked is a Rand that runs a side effect before each draw, to interleave a concurrent
// binding between a policy's lookup and its write deterministically.
type hooked struct {
	Rand
	before func()
}

func (h hooked) IntN(n int) int {
	h.before()
	return h.Rand.IntN(n)
}

// storeAt returns a store on a settable clock starting at t0.
func storeAt(idle time.Duration) (*affinity.Store, *time.Time) {
	now := t0
	return affinity.NewStore(idle, func() time.Time { return now }), &now
}

func sessionReq(stage plan.Role, key string) *Request {
	r := request(stage)
	r.SessionKey = key
	return r
}

func key(stage plan.Role, value string) affinity.Key {
	return affinity.Key{Model: "m", Bucket: "b", Stage: stage, Value: value}
}

func bound(t *testing.T, s *affinity.Store, k affinity.Key) string {
	t.Helper()
	id, _ := s.Get(k)
	return id
}

func without(ws []*engine.Worker, id string) []*engine.Worker {
	var out []*engine.Worker
	for _, w := range ws {
		if w.ID() != id {
			out = append(out, w)
		}
	}
	return out
}

func TestSessionAware(t *testing.T) {
	// Power-of-two draws i then j (j skips i): {0, 0} samples A then B.
	tests := []struct {
		name    string
		key     string
		binding string // pre-existing binding of key, "" for none
		// setup adjusts the fleet before the pick.
		setup      func(f *fleet)
		limits     Limits
		candidates func(f *fleet) []*engine.Worker // nil: all of A, B, C
		draws      []int
		want       string // engine id, or "" for an error
		wantReason string
		wantErr    any
		wantBound  string // binding after the pick
	}{
		{name: "no key: power-of-two, nothing bound", draws: []int{0, 0},
			setup: func(f *fleet) { f.inflight("A", 2) }, want: "B", wantReason: "no session key; power-of-two, not bound"},
		{name: "new key: power-of-two choice bound", key: "s1", draws: []int{2, 0},
			want: "C", wantReason: "new session bound to the power-of-two choice", wantBound: "C"},
		{name: "binding reused regardless of pressure", key: "s1", binding: "A",
			setup: func(f *fleet) { f.inflight("A", 50) },
			want:  "A", wantReason: "session binding reused", wantBound: "A"},
		{name: "reused binding still checked: rejection keeps it and tries nothing else", key: "s1", binding: "A",
			setup:  func(f *fleet) { f.inflight("A", 4) },
			limits: Limits{MaxInflightRequests: 4}, wantErr: new(*AdmissionRejected), wantBound: "A"},
		{name: "binding outside the candidates is replaced", key: "s1", binding: "A",
			candidates: func(f *fleet) []*engine.Worker { return without(f.workers, "A") }, draws: []int{1, 0},
			want: "C", wantReason: "session rebound: its engine left the group", wantBound: "C"},
		{name: "new key whose choice is rejected: no binding", key: "s1", draws: []int{0, 0},
			setup:  func(f *fleet) { f.inflight("A", 4); f.inflight("B", 4); f.inflight("C", 4) },
			limits: Limits{MaxInflightRequests: 4}, wantErr: new(*AdmissionRejected)},
		{name: "fallback runs without limits; the session policy checks its choice", key: "s1", draws: []int{0, 0},
			setup:  func(f *fleet) { f.inflight("A", 1); f.inflight("B", 3) },
			limits: Limits{MaxInflightRequests: 1}, wantErr: new(*AdmissionRejected)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, plan.RolePrefill, "A", "B", "C")
			if tt.setup != nil {
				tt.setup(f)
			}
			store, _ := storeAt(time.Minute)
			k := key(plan.RolePrefill, tt.key)
			if tt.binding != "" {
				store.CompareAndBind(k, "", tt.binding)
			}
			p := NewSessionAware(store, f.table, script(t, tt.draws...), tt.limits)
			cands := f.workers
			if tt.candidates != nil {
				cands = tt.candidates(f)
			}
			pick, err := p.Pick(context.Background(), cands, sessionReq(plan.RolePrefill, tt.key))
			switch target := tt.wantErr.(type) {
			case nil:
				if err != nil || pick.Engine.ID() != tt.want || pick.Reason != tt.wantReason {
					t.Fatalf("Pick = %v (%q), %v; want %s (%q)", pick.Engine, pick.Reason, err, tt.want, tt.wantReason)
				}
			case **AdmissionRejected:
				if !errors.As(err, target) {
					t.Fatalf("err = %v, want AdmissionRejected", err)
				}
			}
			if got := bound(t, store, k); tt.key != "" && got != tt.wantBound {
				t.Fatalf("binding after pick = %q, want %q", got, tt.wantBound)
			}
			if tt.key == "" && store.Len() != 0 {
				t.Fatal("a keyless request created a binding")
			}
		})
	}
}

func TestSessionAwareConcurrentBinding(t *testing.T) {
	tests := []struct {
		name       string
		winner     string // bound by a concurrent pick between lookup and write
		limits     Limits
		inflight   map[string]int64
		candidates []string
		want       string
		wantReason string
		wantBound  string
		wantReject bool
	}{
		{name: "the concurrent binding wins", winner: "B",
			want: "B", wantReason: "session bound by a concurrent request first", wantBound: "B"},
		{name: "the concurrent winner is checked before it is returned", winner: "B",
			limits: Limits{MaxInflightRequests: 1}, inflight: map[string]int64{"B": 1},
			wantReject: true, wantBound: "B"},
		{name: "a winner outside the candidates is replaced", winner: "Z",
			want: "A", wantReason: "session rebound: its engine left the group", wantBound: "A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, plan.RolePlain, "A", "B")
			for id, n := range tt.inflight {
				f.inflight(id, n)
			}
			store, _ := storeAt(time.Minute)
			k := key(plan.RolePlain, "s1")
			once := sync.Once{}
			rnd := hooked{Rand: script(t, 0, 0), before: func() {
				once.Do(func() { store.CompareAndBind(k, "", tt.winner) })
			}}
			pick, err := NewSessionAware(store, f.table, rnd, tt.limits).Pick(context.Background(), f.workers, sessionReq(plan.RolePlain, "s1"))
			var rej *AdmissionRejected
			switch {
			case tt.wantReject:
				if !errors.As(err, &rej) || rej.Engine.ID() != tt.winner {
					t.Fatalf("err = %v, want the winner %s rejected", err, tt.winner)
				}
			case err != nil || pick.Engine.ID() != tt.want || pick.Reason != tt.wantReason:
				t.Fatalf("Pick = %v (%q), %v; want %s (%q)", pick.Engine, pick.Reason, err, tt.want, tt.wantReason)
			}
			if got := bound(t, store, k); got != tt.wantBound {
				t.Fatalf("binding = %q, want %q", got, tt.wantBound)
			}
		})
	}
}

func TestSessionAwareConcurrentFirstPicksConverge(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B", "C", "D")
	store := affinity.NewStore(time.Minute, nil)
	p := NewSessionAware(store, f.table, NewSeededRand(1), Limits{})
	const n = 32
	got := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			pick, err := p.Pick(context.Background(), f.workers, sessionReq(plan.RolePlain, "s1"))
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = pick.Engine.ID()
		})
	}
	close(start)
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("concurrent first picks diverged: %v", got)
		}
	}
	if b := bound(t, store, key(plan.RolePlain, "s1")); b != got[0] {
		t.Fatalf("binding %q, picks %q", b, got[0])
	}
}

func TestSessionAwareScopes(t *testing.T) {
	f := newFleet(t, plan.RolePrefill, "A", "B")
	store, _ := storeAt(time.Minute)
	p := NewSessionAware(store, f.table, script(t, 1, 0), Limits{})
	store.CompareAndBind(key(plan.RolePrefill, "s1"), "", "A")
	// Same session key, another bucket: a binding of its own.
	req := sessionReq(plan.RolePrefill, "s1")
	req.BucketID = "other"
	pick, err := p.Pick(context.Background(), f.workers, req)
	if err != nil || pick.Engine.ID() != "B" {
		t.Fatalf("Pick = %v, %v; want B from a new binding", pick.Engine, err)
	}
	if got := bound(t, store, affinity.Key{Model: "m", Bucket: "other", Stage: plan.RolePrefill, Value: "s1"}); got != "B" {
		t.Fatalf("other bucket bound %q", got)
	}
	if got := bound(t, store, key(plan.RolePrefill, "s1")); got != "A" {
		t.Fatalf("first bucket's binding changed to %q", got)
	}
}

func TestAffinityDryRunWritesNothing(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B")
	store, now := storeAt(10 * time.Second)
	p := NewSessionAware(store, f.table, script(t, 1, 0), Limits{})
	pass, group := traced()
	pass.DryRun = true

	pick, err := p.Pick(context.Background(), f.workers, in(pass, sessionReq(plan.RolePlain, "new")))
	if err != nil || pick.Engine.ID() != "B" || pick.Reason != "new session; power-of-two choice (dry run, not bound)" {
		t.Fatalf("dry-run pick = %v (%q), %v", pick.Engine, pick.Reason, err)
	}
	if store.Len() != 0 {
		t.Fatal("a dry run wrote a binding")
	}
	// The nested fallback's choice is a note; only the session policy's own check is a verdict.
	if notes := group().Notes; len(notes) != 1 || notes[0] != "fallback chose B: "+reasonInflightTie {
		t.Fatalf("notes = %q", notes)
	}
	if v := group().Admission; len(v) != 1 || v[0].Engine != "B" || !v[0].Admitted {
		t.Fatalf("verdicts = %+v, want B admitted once", v)
	}

	// A dry-run reuse does not refresh the binding's idle timer.
	k := key(plan.RolePlain, "old")
	store.CompareAndBind(k, "", "A")
	*now = now.Add(8 * time.Second)
	if pick, err := p.Pick(context.Background(), f.workers, in(pass, sessionReq(plan.RolePlain, "old"))); err != nil || pick.Engine.ID() != "A" {
		t.Fatalf("dry-run reuse = %v, %v", pick.Engine, err)
	}
	*now = now.Add(3 * time.Second)
	if _, ok := store.Get(k); ok {
		t.Fatal("a dry-run reuse refreshed the binding")
	}
}

func TestStickyFallbacks(t *testing.T) {
	tests := []struct {
		fallback plan.PolicyType
		draws    []int
		setup    func(f *fleet)
		want     []string // picks for routing keys k0, k1, k2
	}{
		{fallback: "", want: []string{"A", "B", "C"}},
		{fallback: plan.RoundRobin, want: []string{"A", "B", "C"}},
		{fallback: plan.Random, draws: []int{2, 2, 1}, want: []string{"C", "C", "B"}},
		{fallback: plan.PowerOfTwo, draws: []int{0, 0, 1, 0, 2, 0}, setup: func(f *fleet) { f.inflight("A", 1) },
			want: []string{"B", "B", "C"}},
		{fallback: plan.LoadBased, setup: func(f *fleet) { f.inflight("A", 1); f.inflight("C", 1) },
			want: []string{"B", "B", "B"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.fallback), func(t *testing.T) {
			f := newFleet(t, plan.RolePlain, "A", "B", "C")
			if tt.setup != nil {
				tt.setup(f)
			}
			store, _ := storeAt(time.Minute)
			p, err := NewSticky(store, f.table, script(t, tt.draws...), Limits{}, tt.fallback)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tt.want {
				req := request(plan.RolePlain)
				req.RoutingKey = string(rune('0' + i))
				req.SessionKey = "ignored"
				pick, err := p.Pick(context.Background(), f.workers, req)
				if err != nil || pick.Engine.ID() != want {
					t.Fatalf("key %d: Pick = %v, %v; want %s", i, pick.Engine, err, want)
				}
				if got := bound(t, store, key(plan.RolePlain, req.RoutingKey)); got != want {
					t.Fatalf("key %d bound to %q, want %s", i, got, want)
				}
			}
			// Each key sticks to its engine, whatever the fallback would choose now.
			req := request(plan.RolePlain)
			req.RoutingKey = "0"
			if pick, _ := p.Pick(context.Background(), f.workers, req); pick.Engine.ID() != tt.want[0] || pick.Reason != "routing-key binding reused" {
				t.Fatalf("repeat of key 0 = %v (%q), want %s reused", pick.Engine, pick.Reason, tt.want[0])
			}
			if store.Len() != len(tt.want) {
				t.Fatalf("%d bindings, want %d (the session key must not bind)", store.Len(), len(tt.want))
			}
		})
	}
}

func TestStickyChecksItsFallbackChoice(t *testing.T) {
	// load_based with the sticky limits would skip A; as a nested fallback it runs without
	// limits, picks A (least reported load) and Sticky rejects it.
	f := newFleet(t, plan.RolePlain, "A", "B")
	f.report("A", native(0, 0, 0, 0, 1000))
	f.report("B", native(5, 0, 0, 0, 1000))
	f.inflight("A", 1)
	store, _ := storeAt(time.Minute)
	p, err := NewSticky(store, f.table, script(t), Limits{MaxInflightRequests: 1}, plan.LoadBased)
	if err != nil {
		t.Fatal(err)
	}
	req := request(plan.RolePlain)
	req.RoutingKey = "k"
	_, err = p.Pick(context.Background(), f.workers, req)
	var rej *AdmissionRejected
	if !errors.As(err, &rej) || rej.Engine.ID() != "A" || rej.Limit != LimitInflight {
		t.Fatalf("err = %v, want A rejected on max_inflight_requests", err)
	}
	if store.Len() != 0 {
		t.Fatal("a rejected choice was bound")
	}

	// Without a key the same checks apply and nothing is bound.
	req.RoutingKey = ""
	if _, err := p.Pick(context.Background(), f.workers, req); !errors.As(err, &rej) {
		t.Fatalf("keyless err = %v, want AdmissionRejected", err)
	}
}

func TestStickyBadFallback(t *testing.T) {
	_, err := NewSticky(affinity.NewStore(0, nil), nil, script(t), Limits{}, plan.CacheAware)
	var ic *InvalidConfiguration
	if !errors.As(err, &ic) {
		t.Fatalf("err = %v, want InvalidConfiguration", err)
	}
}

func TestAffinityNoCandidates(t *testing.T) {
	p := NewSessionAware(affinity.NewStore(0, nil), nil, script(t), Limits{})
	var nc *NoCandidates
	if _, err := p.Pick(context.Background(), nil, sessionReq(plan.RoleDecode, "s")); !errors.As(err, &nc) {
		t.Fatalf("err = %v, want NoCandidates", err)
	}
}
