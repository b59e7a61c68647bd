package server

import (
	"cmp"
	"slices"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
)

// PrefixIndexSize is how much of an engine's KV cache one prefix index believes it knows
// about, as /admin/state reports it. A remote indexer keeps its index elsewhere, so it has
// no size here.
type PrefixIndexSize struct {
	// Source is "local_index" (fed by the engine's KV events), "speculative" (the local
	// index's guesses from dispatches, not yet confirmed by events or expired) or
	// "approximate" (learned from the router's dispatches).
	Source string `json:"source"`
	// Blocks is how many pages the index holds for the engine (summed over DP ranks for the
	// local index), and Tokens the same in tokens.
	Blocks int   `json:"blocks"`
	Tokens int64 `json:"tokens"`
	// CapacityTokens bounds an approximate index's share of the engine; 0 for the local
	// index, which holds what the engine reports.
	CapacityTokens int64 `json:"capacity_tokens,omitempty"`
}

// prefixSizes lists the engine's size in every local prefix index: the event-fed one when
// the engine publishes KV events, its speculative entries when a source keeps them, then
// each approximate index, largest capacity first.
func (s *generation) prefixSizes(e plan.Engine) []PrefixIndexSize {
	var out []PrefixIndexSize
	if e.KVEvents != nil {
		n, bs := s.deps.KV.Blocks(e.ID), kv.BlockSize(e)
		out = append(out, PrefixIndexSize{Source: "local_index", Blocks: n, Tokens: int64(n) * int64(bs)})
	}
	if n, tokens, ok := s.deps.SpeculativeBlocks(e.ID); ok {
		out = append(out, PrefixIndexSize{Source: "speculative", Blocks: n, Tokens: tokens})
	}
	var approx []PrefixIndexSize
	for _, a := range s.deps.Approx {
		if !a.Has(e.ID) {
			continue
		}
		n, bs := a.Blocks(e.ID), int64(a.BlockSize())
		approx = append(approx, PrefixIndexSize{Source: "approximate", Blocks: n, Tokens: int64(n) * bs,
			CapacityTokens: int64(a.CapacityBlocks()) * bs})
	}
	slices.SortFunc(approx, func(a, b PrefixIndexSize) int {
		return cmp.Or(cmp.Compare(b.CapacityTokens, a.CapacityTokens), cmp.Compare(b.Tokens, a.Tokens))
	})
	return append(out, approx...)
}
