package policy

import "github.com/routerkit/router/runtime/decision"

// Pass is one selection pass's own state: what records it, whether it is a dry run, and
// its prefix lookups. The handler (or explain) makes one per request and hands it down
// explicitly, through the resolver and the groups to the policies in Request.Pass, rather
// than in context keys that every policy would look up through the request's whole
// context chain. A nil *Pass records nothing and is not a dry run.
type Pass struct {
	// Trace receives the pass; nil records nothing.
	Trace *decision.Trace
	// DryRun marks a pass that selects exactly as serving would, reading the same shared
	// state, but writes no affinity binding and refreshes none, as `router explain` and
	// the server's explain endpoint run it: explaining a request never changes where later
	// requests go.
	DryRun bool
	memo   *prefixMemo
}

// Rec is the pass's trace, or nil.
func (p *Pass) Rec() *decision.Trace {
	if p == nil {
		return nil
	}
	return p.Trace
}

// Dry reports whether p is a dry run.
func (p *Pass) Dry() bool { return p != nil && p.DryRun }

// Start readies p for a new selection pass and returns it: with a fresh prefix memo when
// the pass may look prefixes up (a model with a cache-aware group), so that its bucket
// attempts and PD stages query each source once, and with none otherwise. A nil p stays
// nil unless a memo is needed.
func (p *Pass) Start(memoize bool) *Pass {
	if p == nil {
		if !memoize {
			return nil
		}
		p = &Pass{}
	}
	p.memo = nil
	if memoize {
		p.memo = &prefixMemo{}
		p.memo.entries = p.memo.first[:0] // the memo and its first entry in one allocation
	}
	return p
}
