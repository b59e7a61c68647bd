package policy

import (
	"context"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/state/load"
)

// Random chooses one candidate uniformly. Like power-of-two it is a sampling policy: it
// checks admission on its choice only and returns AdmissionRejected rather than drawing
// again, so a saturated group moves the request to the next bucket.
type Random struct {
	load   *load.Table
	rand   Rand
	limits Limits
}

// NewRandom returns a random policy drawing from rnd.
func NewRandom(table *load.Table, rnd Rand, limits Limits) *Random {
	return &Random{load: table, rand: rnd, limits: limits}
}

// Reason given by Random picks.
const reasonRandom = "uniform random choice"

// Pick implements Policy.
func (p *Random) Pick(ctx context.Context, engines []*engine.Worker, req *Request) (Pick, error) {
	if len(engines) == 0 {
		return noCandidates(req)
	}
	rec := req.Pass.Rec()
	w := engines[p.rand.IntN(len(engines))]
	r := p.load.LoadAt(w, p.load.Now())
	rec.Observe(w, r)
	if rej := p.limits.admit(rec, w, req.Stage, r); rej != nil {
		return Pick{}, rej
	}
	return Pick{Engine: w, Reason: reasonRandom}, nil
}
