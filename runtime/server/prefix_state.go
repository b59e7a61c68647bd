package server

import (
	"cmp"
	"slices"

	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
)

// prefixSizes lists the engine's size in every local prefix index: the event-fed one when
// the engine publishes KV events, its speculative entries when a source keeps them, then
// each approximate index, largest capacity first.
func (s *generation) prefixSizes(e plan.Engine) []control.PrefixIndexSize {
	var out []control.PrefixIndexSize
	if e.KVEvents != nil {
		n, bs := s.deps.KV.Blocks(e.ID), kv.BlockSize(e)
		out = append(out, control.PrefixIndexSize{Source: "local_index", Blocks: n, Tokens: int64(n) * int64(bs)})
	}
	if n, tokens, ok := s.deps.SpeculativeBlocks(e.ID); ok {
		out = append(out, control.PrefixIndexSize{Source: "speculative", Blocks: n, Tokens: tokens})
	}
	var approx []control.PrefixIndexSize
	for _, a := range s.deps.Approx {
		if !a.Has(e.ID) {
			continue
		}
		n, bs := a.Blocks(e.ID), int64(a.BlockSize())
		approx = append(approx, control.PrefixIndexSize{Source: "approximate", Blocks: n, Tokens: int64(n) * bs,
			CapacityTokens: int64(a.CapacityBlocks(e.ID)) * bs})
	}
	slices.SortFunc(approx, func(a, b control.PrefixIndexSize) int {
		return cmp.Or(cmp.Compare(b.CapacityTokens, a.CapacityTokens), cmp.Compare(b.Tokens, a.Tokens))
	})
	return append(out, approx...)
}
