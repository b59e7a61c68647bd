package bucket

import (
	"context"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/state/load"
)

const model = "llama"

func i64(v int64) *int64 { return &v }

var rr = plan.Policy{Type: plan.RoundRobin}

// env is a model's registry and load table, with every engine healthy and idle.
type env struct {
	t     testing.TB
	reg   *engine.Registry
	table *load.Table
}

func newEnv(t testing.TB, engines ...plan.Engine) *env {
	t.Helper()
	for i := range engines {
		if engines[i].Model == "" {
			engines[i].Model = model
		}
	}
	reg, err := engine.FromPlan(engines)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &env{t: t, reg: reg, table: load.NewTable(engines, func() time.Time { return t0 })}
}

func eng(id string, role plan.Role) plan.Engine { return plan.Engine{ID: id, Role: role, DPSize: 1} }

func (e *env) w(id string) *engine.Worker {
	w := e.reg.Get(id)
	if w == nil {
		e.t.Fatalf("no engine %s", id)
	}
	return w
}

func (e *env) resolver(buckets ...plan.Bucket) *Resolver {
	e.t.Helper()
	r, err := NewResolver(plan.Model{Name: model, Buckets: buckets}, e.reg, policy.Deps{Load: e.table, Rand: policy.NewSeededRand(1)})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func plain(id string, maxInput, maxContext *int64, ids []string, p plan.Policy) plan.Bucket {
	return plan.Bucket{ID: id, Limits: plan.Limits{Max: maxInput}, MaxContextTokens: maxContext,
		Groups: plan.Groups{Plain: &plan.Group{WorkerIDs: ids, Policy: p}}}
}

func pd(id string, maxInput, maxContext *int64, prefill, decode []string, p plan.Policy) plan.Bucket {
	return plan.Bucket{ID: id, Limits: plan.Limits{Max: maxInput}, MaxContextTokens: maxContext,
		Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: plan.Group{WorkerIDs: prefill, Policy: p},
			Decode:  plan.Group{WorkerIDs: decode, Policy: p},
		}}}
}

// policyFunc adapts a function to policy.Policy for tests that script a policy's result.
type policyFunc func(ctx context.Context, engines []*engine.Worker, req *policy.Request) (policy.Pick, error)

func (f policyFunc) Pick(ctx context.Context, engines []*engine.Worker, req *policy.Request) (policy.Pick, error) {
	return f(ctx, engines, req)
}

func facts(input int64) *policy.Facts { return &policy.Facts{Model: model, InputTokens: input} }

func withPeak(input, peak int64) *policy.Facts {
	return &policy.Facts{Model: model, InputTokens: input, ExpectedPeak: peak, PeakKnown: true}
}

func traced() (*policy.Pass, *decision.Trace) {
	tr := &decision.Trace{}
	return &policy.Pass{Trace: tr}, tr
}

func bucketIDs(bs []*Bucket) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.ID()
	}
	return out
}

func workerIDs(ws []*engine.Worker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID()
	}
	return out
}
