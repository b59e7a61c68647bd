package bucket

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
)

// TestGroupCandidates checks what a group hands its policy: healthy engines of the
// model and stage that are members, sorted by id.
func TestGroupCandidates(t *testing.T) {
	tests := []struct {
		name      string
		ids       []string
		unhealthy []string
		want      string
	}{
		{name: "absent membership is every engine of the model and role", ids: nil, want: "[P1 P2 P3]"},
		{name: "explicit membership, sorted by id", ids: []string{"P3", "P1"}, want: "[P1 P3]"},
		{name: "unhealthy members are left out", ids: nil, unhealthy: []string{"P2"}, want: "[P1 P3]"},
		{name: "a member of another role is left out", ids: []string{"P1", "D1"}, want: "[P1]"},
		{name: "an engine of another model is left out", ids: []string{"P1", "X1"}, want: "[P1]"},
		{name: "empty membership is no engine", ids: []string{}, want: "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			other := eng("X1", plan.RolePrefill)
			other.Model = "other"
			e := newEnv(t, eng("P2", plan.RolePrefill), eng("P3", plan.RolePrefill), eng("P1", plan.RolePrefill), eng("D1", plan.RoleDecode), other)
			for _, id := range tt.unhealthy {
				e.w(id).SetHealthy(false)
			}
			b := pd("b", nil, nil, tt.ids, nil, rr)
			r := e.resolver(b)
			var got string
			var gotReq policy.Request
			r.buckets[0].prefill.policy = policyFunc(func(_ context.Context, ws []*engine.Worker, req *policy.Request) (policy.Pick, error) {
				got, gotReq = fmt.Sprint(workerIDs(ws)), *req
				return policy.Pick{}, &policy.NoCandidates{Stage: req.Stage}
			})
			_, _ = r.buckets[0].prefill.Pick(context.Background(), facts(10), nil)
			if got != tt.want {
				t.Fatalf("candidates = %s, want %s", got, tt.want)
			}
			if gotReq.Stage != plan.RolePrefill || gotReq.BucketID != "b" || gotReq.InputTokens != 10 || gotReq.Model != model {
				t.Errorf("policy request = %+v, want prefill stage of bucket b with the facts", gotReq)
			}
		})
	}
}

func TestGroupSeesRegistryChanges(t *testing.T) {
	e := newEnv(t, eng("A", plan.RolePlain))
	r := e.resolver(plain("b", nil, nil, nil, rr))
	g := r.buckets[0].plain
	if _, err := g.Pick(context.Background(), facts(1), nil); err != nil {
		t.Fatal(err)
	}
	e.reg.Put(engine.New(plan.Engine{ID: "B", Model: model, Role: plan.RolePlain}))
	var n int
	g.policy = policyFunc(func(_ context.Context, ws []*engine.Worker, _ *policy.Request) (policy.Pick, error) {
		n = len(ws)
		return policy.Pick{Engine: ws[0]}, nil
	})
	if _, err := g.Pick(context.Background(), facts(1), nil); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("after registering B the group offered %d candidates, want 2", n)
	}
}

func TestGroupRejectsForeignPicks(t *testing.T) {
	tests := []struct {
		name string
		pick func(e *env) *engine.Worker
	}{
		{name: "a new worker with a candidate's id", pick: func(*env) *engine.Worker {
			return engine.New(plan.Engine{ID: "A", Model: model, Role: plan.RolePlain})
		}},
		{name: "an unhealthy member that was not offered", pick: func(e *env) *engine.Worker { return e.w("B") }},
		{name: "no engine and no error", pick: func(*env) *engine.Worker { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, eng("A", plan.RolePlain), eng("B", plan.RolePlain))
			e.w("B").SetHealthy(false)
			g := e.resolver(plain("b", nil, nil, nil, rr)).buckets[0].plain
			g.policy = policyFunc(func(context.Context, []*engine.Worker, *policy.Request) (policy.Pick, error) {
				return policy.Pick{Engine: tt.pick(e)}, nil
			})
			_, err := g.Pick(context.Background(), facts(1), nil)
			var out *policy.OutsideCandidates
			if !errors.As(err, &out) {
				t.Fatalf("err = %v, want OutsideCandidates", err)
			}
		})
	}
}

// TestGroupPooledCandidatesAreReleased exercises the pooled buffer used when members are
// unhealthy: a second pick must see its own candidates, not the first pick's.
func TestGroupPooledCandidatesAreReleased(t *testing.T) {
	e := newEnv(t, eng("A", plan.RolePlain), eng("B", plan.RolePlain), eng("C", plan.RolePlain))
	g := e.resolver(plain("b", nil, nil, nil, rr)).buckets[0].plain
	var seen []string
	g.policy = policyFunc(func(_ context.Context, ws []*engine.Worker, _ *policy.Request) (policy.Pick, error) {
		seen = append(seen, fmt.Sprint(workerIDs(ws)))
		return policy.Pick{Engine: ws[0]}, nil
	})
	e.w("A").SetHealthy(false)
	_, _ = g.Pick(context.Background(), facts(1), nil)
	e.w("A").SetHealthy(true)
	e.w("C").SetHealthy(false)
	_, _ = g.Pick(context.Background(), facts(1), nil)
	if got := fmt.Sprint(seen); got != "[[B C] [A B]]" {
		t.Fatalf("candidates per pick = %s, want [[B C] [A B]]", got)
	}
}
