package policy

import (
	"context"
	"sync/atomic"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/state/load"
)

// RoundRobin rotates over the candidates with a cursor owned by this instance, so each
// role group rotates independently (docs/design.md, Deliberate changes).
//
// Starting at the cursor, it returns the first engine that passes admission; the cursor
// advances by one per pick whatever the outcome. When every candidate is rejected it
// returns NoAdmissibleEngine with all the rejections.
type RoundRobin struct {
	load   *load.Table
	limits Limits
	next   atomic.Uint64
}

// NewRoundRobin returns a round-robin policy reading admission metrics from table.
func NewRoundRobin(table *load.Table, limits Limits) *RoundRobin {
	return &RoundRobin{load: table, limits: limits}
}

// Reason given by RoundRobin picks.
const reasonRotation = "next in rotation"

// Pick implements Policy.
func (p *RoundRobin) Pick(ctx context.Context, engines []*engine.Worker, req *Request) (Pick, error) {
	n := uint64(len(engines))
	if n == 0 {
		return noCandidates(req)
	}
	rec := req.Pass.Rec()
	// A dry run reads the cursor without moving it: explaining a request must not change
	// which engine the next served request gets.
	start := p.next.Load()
	if !req.Pass.Dry() {
		start = p.next.Add(1) - 1
	}
	now := p.load.Now()
	var rejected []*AdmissionRejected
	for k := range n {
		w := engines[(start+k)%n]
		r := p.load.LoadAt(w, now)
		rec.Observe(w, r)
		if rej := p.limits.admit(rec, w, req.Stage, r); rej != nil {
			rejected = append(rejected, rej)
			continue
		}
		return Pick{Engine: w, Reason: reasonRotation}, nil
	}
	return Pick{}, &NoAdmissibleEngine{Stage: req.Stage, Rejections: rejected}
}
