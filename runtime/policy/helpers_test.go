package policy

import (
	"testing"
	"time"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// scripted is a Rand that returns preset values and fails the test on any other draw.
type scripted struct {
	t     *testing.T
	vals  []int
	calls int
}

func script(t *testing.T, vals ...int) *scripted { return &scripted{t: t, vals: vals} }

func (r *scripted) IntN(n int) int {
	r.t.Helper()
	if r.calls >= len(r.vals) {
		r.t.Fatalf("unexpected random draw IntN(%d) after %d draws", n, r.calls)
	}
	v := r.vals[r.calls]
	r.calls++
	if v < 0 || v >= n {
		r.t.Fatalf("scripted value %d outside [0, %d)", v, n)
	}
	return v
}

// fleet is a set of workers of one role with a load table on a fixed clock at t0 and a
// one-second freshness window.
type fleet struct {
	t       *testing.T
	table   *load.Table
	workers []*engine.Worker
}

func newFleet(t *testing.T, role plan.Role, ids ...string) *fleet {
	f := &fleet{t: t}
	var engines []plan.Engine
	for _, id := range ids {
		e := plan.Engine{ID: id, Model: "m", Role: role, DPSize: 1, Load: plan.LoadSource{StaleAfterMS: 1000}}
		engines = append(engines, e)
		f.workers = append(f.workers, engine.New(e))
	}
	f.table = load.NewTable(engines, func() time.Time { return t0 })
	return f
}

func (f *fleet) w(id string) *engine.Worker {
	for _, w := range f.workers {
		if w.ID() == id {
			return w
		}
	}
	f.t.Fatalf("no worker %s", id)
	return nil
}

// report publishes s for the engine; a zero timestamp means "now".
func (f *fleet) report(id string, s load.Sample) {
	f.t.Helper()
	if s.At.IsZero() {
		s.At = t0
	}
	if err := f.table.Update(id, 0, s); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) inflight(id string, n int64) { f.w(id).AddInflight(n) }

// native returns a native sample with a valid capacity.
func native(running, waiting, uncached, usedKV, maxKV int64) load.Sample {
	return load.Sample{Native: true, Running: running, Waiting: waiting, WaitingUncachedTokens: uncached,
		UsedKVTokens: usedKV, TotalKVTokens: usedKV + uncached, MaxKVTokens: maxKV, MaxRunning: 64}
}

// traced returns a pass whose trace has an open group, so policy observations and
// admission verdicts are recorded, and a function returning that group.
func traced() (*Pass, func() decision.Group) {
	tr := &decision.Trace{}
	tr.BeginAttempt("b")
	tr.BeginGroup(plan.RolePlain, "test", nil)
	return &Pass{Trace: tr}, func() decision.Group { return tr.Attempts[0].Groups[0] }
}

// in puts req in pass.
func in(pass *Pass, req *Request) *Request {
	req.Pass = pass
	return req
}

func observedIDs(g decision.Group) []string {
	var out []string
	for _, o := range g.Observed {
		out = append(out, o.Engine)
	}
	return out
}

func request(stage plan.Role) *Request {
	return &Request{Facts: Facts{Model: "m", InputTokens: 100}, Stage: stage, BucketID: "b"}
}
