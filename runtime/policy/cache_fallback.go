package policy

import (
	"fmt"
	"slices"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/state/load"
)

// The cache-aware policy's load fallback on a prefix miss (docs/design.md, Policies:
// cache-aware step 6): power-of-k sampling within the soft queue tier, then hard admission
// on the winner.

// fallback runs step 6.
func (p *CacheAware) fallback(rec *decision.Trace, engines []*engine.Worker, req *Request, now load.Instant) (Pick, error) {
	// The pool is the candidates the soft queue gate admits, whose loads the gate has
	// read, or, without a gate, all candidates, read as sampled.
	var gated []obs
	if p.tune.queueLimit > 0 {
		gated = p.gatePool(rec, engines, now)
	}
	n := len(engines)
	if gated != nil {
		n = len(gated)
	}
	at := func(i int) obs {
		if gated != nil {
			return gated[i]
		}
		return observe(rec, p.load, engines[i], now)
	}

	var chosen obs
	var reason string
	var buf [16]obs
	cands := buf[:0]
	switch k := p.tune.loadChoices; {
	case k == 1:
		chosen, reason = at(p.rand.IntN(n)), reasonMissRandom
	case k >= n:
		for i := range n {
			cands = append(cands, at(i))
		}
		chosen, reason = p.least(cands, req.InputTokens), reasonMissExact
	default:
		var idx [8]int
		for _, i := range p.sample(n, k, idx[:0]) {
			cands = append(cands, at(i))
		}
		chosen, reason = p.least(cands, req.InputTokens), p.reasonSampled
	}
	if rej := p.limits.admit(rec, chosen.w, req.Stage, chosen.r); rej != nil {
		return Pick{}, rej
	}
	return Pick{Engine: chosen.w, Reason: reason}, nil
}

// gatePool returns the candidates the soft queue gate admits, with their loads, or every
// candidate when it admits none.
func (p *CacheAware) gatePool(rec *decision.Trace, engines []*engine.Worker, now load.Instant) []obs {
	all := make([]obs, len(engines))
	pool := make([]obs, 0, len(engines))
	for i, w := range engines {
		all[i] = observe(rec, p.load, w, now)
		if !overQueue(&all[i], p.tune.queueLimit) {
			pool = append(pool, all[i])
		}
	}
	if len(pool) > 0 {
		if rec.Detailed() && len(pool) < len(all) {
			rec.Note(fmt.Sprintf("load fallback: %d of %d candidates are under worker_queue_limit", len(pool), len(all)))
		}
		return pool
	}
	if rec.Detailed() {
		rec.Note("load fallback: every candidate is at worker_queue_limit or over; choosing among all")
	}
	return all
}

// sample appends k distinct uniform indices below n to dst (Floyd's algorithm: k draws,
// no scratch array of size n). Order carries no meaning: ties are broken at random.
func (p *CacheAware) sample(n, k int, dst []int) []int {
	for j := n - k; j < n; j++ {
		t := p.rand.IntN(j + 1)
		if slices.Contains(dst, t) {
			t = j
		}
		dst = append(dst, t)
	}
	return dst
}

// least returns the least pressured of cands, choosing uniformly among ties.
func (p *CacheAware) least(cands []obs, input int64) obs {
	lv := levelOf(cands, input)
	return cands[leastRandomTie(len(cands), func(i, j int) int { return lv.compare(&cands[i], &cands[j]) }, p.rand)]
}
