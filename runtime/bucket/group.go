package bucket

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
)

// Group is an engine group: a membership set and its policy instance, reused across
// requests. It references engines by id and resolves live workers from the registry on
// every pick, so registry changes and health apply immediately.
type Group struct {
	model      string
	bucketID   string
	stage      plan.Role
	ids        map[string]bool // nil: every engine of the model and role
	policyType plan.PolicyType
	policy     policy.Policy
	reg        *engine.Registry

	// members caches the registry's workers that belong to the group, keyed by the
	// registry snapshot they came from. Membership only changes with the snapshot, so a
	// pick costs a pointer comparison plus a health scan instead of a set lookup per worker.
	members atomic.Pointer[memberCache]
}

type memberCache struct {
	snap    *engine.Snapshot
	workers []*engine.Worker // sorted by id
}

func newGroup(model, bucketID string, stage plan.Role, pg plan.Group, reg *engine.Registry, deps policy.Deps) (*Group, error) {
	p, err := policy.New(model, pg.Policy, deps)
	if err != nil {
		return nil, fmt.Errorf("%s group: %w", stage, err)
	}
	g := &Group{model: model, bucketID: bucketID, stage: stage, policyType: pg.Policy.Type, policy: p, reg: reg}
	if pg.WorkerIDs != nil {
		g.ids = make(map[string]bool, len(pg.WorkerIDs))
		for _, id := range pg.WorkerIDs {
			g.ids[id] = true
		}
	}
	return g, nil
}

func (g *Group) memberWorkers() []*engine.Worker {
	snap := g.reg.Snapshot()
	if c := g.members.Load(); c != nil && c.snap == snap {
		return c.workers
	}
	all := snap.Workers(g.model, g.stage)
	ws := all
	if g.ids != nil {
		ws = nil
		for _, w := range all {
			if g.ids[w.ID()] {
				ws = append(ws, w)
			}
		}
	}
	g.members.Store(&memberCache{snap: snap, workers: ws})
	return ws
}

// candidatePool holds buffers for groups with unhealthy members; when every member is
// healthy the cached member slice is passed as is.
var candidatePool = sync.Pool{New: func() any { return new([]*engine.Worker) }}

// requestPool recycles the per-group policy requests, which escape through the Policy
// interface and would otherwise cost an allocation per group call.
var requestPool = sync.Pool{New: func() any { return new(policy.Request) }}

// Pick selects the group's engine for a request: healthy members of the group with the
// model and stage (the registry's role is authoritative), sorted by id, passed to the
// policy. A result that is not one of those exact worker pointers, such as a
// re-registered worker carrying a candidate's id, is rejected as OutsideCandidates.
func (g *Group) Pick(ctx context.Context, facts *policy.Facts, pass *policy.Pass) (policy.Pick, error) {
	return g.pick(ctx, facts, pass, nil)
}

// pick is Pick for a decode group paired with the prefill engine peer: members that
// cannot receive peer's KV cache are no candidates. A nil peer filters nothing.
func (g *Group) pick(ctx context.Context, facts *policy.Facts, pass *policy.Pass, peer *engine.Worker) (policy.Pick, error) {
	members := g.memberWorkers()
	candidates, buf := eligible(members, facts.Avoid, peer)
	if buf != nil {
		defer release(buf, candidates)
	}

	rec := pass.Rec()
	rec.BeginGroup(g.stage, g.policyType, candidates)
	if peer != nil && (rec.Detailed() || len(candidates) == 0) {
		if why := incompatible(members, facts.Avoid, peer, rec); len(candidates) == 0 && why != "" {
			err := &policy.NoCandidates{Stage: g.stage, Why: why}
			rec.EndGroup(nil, "", err)
			return policy.Pick{}, err
		}
	}
	req := requestPool.Get().(*policy.Request)
	*req = policy.Request{Facts: *facts, Stage: g.stage, BucketID: g.bucketID, Pass: pass}
	pick, err := g.policy.Pick(ctx, candidates, req)
	*req = policy.Request{}
	requestPool.Put(req)
	if err == nil && !contains(candidates, pick.Engine) {
		err = &policy.OutsideCandidates{Stage: g.stage, Engine: pick.Engine}
	}
	if err != nil {
		rec.EndGroup(nil, "", err)
		return policy.Pick{}, err
	}
	rec.EndGroup(pick.Engine, pick.Reason, nil)
	return pick, nil
}

// incompatible notes, in a detailed trace, each available member that cannot receive
// peer's KV cache, and returns why the first of them cannot ("" when all can).
func incompatible(members, avoid []*engine.Worker, peer *engine.Worker, rec *decision.Trace) string {
	first := ""
	for _, w := range members {
		if !w.Available() || avoided(avoid, w) {
			continue
		}
		if why := plan.PDMismatch(peer.PDCompat(), w.PDCompat()); why != "" {
			msg := fmt.Sprintf("%s cannot receive the KV cache of prefill %s: %s", w.ID(), peer.ID(), why)
			if first == "" {
				first = "no member can receive the KV cache of prefill " + peer.ID() + " (" + msg + ")"
			}
			if rec.Detailed() {
				rec.Note("left out " + msg)
			}
		}
	}
	return first
}

func contains(ws []*engine.Worker, w *engine.Worker) bool {
	for _, c := range ws {
		if c == w {
			return true
		}
	}
	return false
}

// eligible returns the available workers of members (healthy, breaker not open, not to
// be avoided by this request) that can receive the KV cache of peer, when peer is set.
// When all are, that is members itself; otherwise it is a pooled buffer, returned too,
// which the caller must release.
func eligible(members, avoid []*engine.Worker, peer *engine.Worker) ([]*engine.Worker, *[]*engine.Worker) {
	ok := func(w *engine.Worker) bool {
		return w.Available() && !avoided(avoid, w) && (peer == nil || plan.PDMismatch(peer.PDCompat(), w.PDCompat()) == "")
	}
	for i, w := range members {
		if ok(w) {
			continue
		}
		buf := candidatePool.Get().(*[]*engine.Worker)
		out := append((*buf)[:0], members[:i]...)
		for _, w := range members[i+1:] {
			if ok(w) {
				out = append(out, w)
			}
		}
		return out, buf
	}
	return members, nil
}

func avoided(avoid []*engine.Worker, w *engine.Worker) bool {
	for _, a := range avoid {
		if a == w {
			return true
		}
	}
	return false
}

func release(buf *[]*engine.Worker, used []*engine.Worker) {
	clear(used) // drop the worker references the pooled buffer would keep alive
	*buf = used[:0]
	candidatePool.Put(buf)
}
