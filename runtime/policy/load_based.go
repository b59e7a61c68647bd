package policy

import (
	"cmp"
	"context"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/state/load"
)

// LeastLoad chooses the least loaded admissible candidate; it is configured as load_based.
//
// Load is the engine-reported queue depth (running plus waiting, summed over DP ranks)
// plus the requests the router dispatched since that report, because reports lag behind
// the router's own decisions. When any candidate lacks a fresh complete report, every
// candidate is compared by router-local in-flight requests instead, so that reported and
// local counts are never mixed in one comparison.
//
// Ties: fewer router in-flight requests first, then a uniform random choice among the
// engines still tied. A fixed choice such as "first by id" would send every request to
// one engine whenever loads tie or reports stop changing, the failure seen upstream with
// min-by-key selection (smg#1714).
//
// Every candidate is checked for admission; rejected engines are skipped, and when none is
// admitted the result is NoAdmissibleEngine with every rejection.
type LeastLoad struct {
	load   *load.Table
	rand   Rand
	limits Limits
}

// NewLeastLoad returns a least-load policy reading engine reports from table.
func NewLeastLoad(table *load.Table, rnd Rand, limits Limits) *LeastLoad {
	return &LeastLoad{load: table, rand: rnd, limits: limits}
}

// Reasons given by LeastLoad picks.
const (
	reasonLeastReported = "least reported load corrected for dispatches since the report"
	reasonLeastInflight = "fewest router in-flight requests (reports incomplete)"
)

// scored is an admitted candidate with the loads it is compared by.
type scored struct {
	w        *engine.Worker
	reported int64 // corrected reported load; meaningful only when every candidate reported
	inflight int64
}

// Pick implements Policy.
func (p *LeastLoad) Pick(ctx context.Context, engines []*engine.Worker, req *Request) (Pick, error) {
	if len(engines) == 0 {
		return noCandidates(req)
	}
	rec := req.Pass.Rec()
	now := p.load.Now()
	allReported := true
	var rejected []*AdmissionRejected
	var buf [32]scored // groups up to this size are scored without allocating
	admitted := buf[:0]
	for _, w := range engines {
		r := p.load.LoadAt(w, now)
		rec.Observe(w, r)
		if r == nil {
			allReported = false
		}
		if rej := p.limits.admit(rec, w, req.Stage, r); rej != nil {
			rejected = append(rejected, rej)
			continue
		}
		s := scored{w: w, inflight: w.Inflight()}
		if r != nil {
			s.reported = r.Running + r.Waiting + r.DispatchesSince()
		}
		admitted = append(admitted, s)
	}
	if len(admitted) == 0 {
		return Pick{}, &NoAdmissibleEngine{Stage: req.Stage, Rejections: rejected}
	}
	key, reason := func(s scored) int64 { return s.inflight }, reasonLeastInflight
	if allReported {
		key, reason = func(s scored) int64 { return s.reported }, reasonLeastReported
	}
	best := admitted[leastRandomTie(len(admitted), func(i, j int) int {
		a, b := &admitted[i], &admitted[j]
		return cmp.Or(cmp.Compare(key(*a), key(*b)), cmp.Compare(a.inflight, b.inflight))
	}, p.rand)]
	return Pick{Engine: best.w, Reason: reason}, nil
}
