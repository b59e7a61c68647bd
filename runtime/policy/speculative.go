package policy

import (
	"cmp"
	"context"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/prefix"
)

// Speculative entries close the gap between a pick and what confirms it (llm-d's
// speculativeIndexing, 2 s by default): an event-fed index learns of a prompt only after
// the engine has computed it and its BlockStored has crossed the network, and the
// approximate index only once the dispatch has succeeded, so a burst of identical prompts
// sent meanwhile all miss and the load fallback scatters them over the group, each engine
// computing the same prefix. With speculative_ttl_ms set, the router records each
// dispatched prompt as held by its engine for that long, as the dispatch starts; the
// engine's events (local index) or the dispatch's success (approximate index) then
// confirm it in the source's own index, where it lives as that index says. A prompt never
// confirmed (the request failed, the engine evicted the pages at once) stops attracting
// requests when the entry expires. sgl-router's radix tree had this effect by inserting
// each request as it was picked.
//
// Speculative entries live in approximate indexes of their own, one per page size, never
// in the source's index, so confirmations and guesses never overwrite each other.
type speculative struct {
	bySize map[int]*prefix.Approx
}

// newSpeculative returns the speculative entries of one local_index or approximate source,
// or nil when the source has none. They track the engines the source's index tracks: the
// engines publishing KV events, by their page size, or every plain and prefill engine at
// the approximate source's page size.
func newSpeculative(p *plan.Plan, src plan.PrefixSource, clock func() time.Time) *speculative {
	if src.SpeculativeTTLMS <= 0 {
		return nil
	}
	engines := map[int][]prefix.Engine{}
	for _, e := range p.Engines {
		if e.Role == plan.RoleDecode || (src.Type == "local_index" && e.KVEvents == nil) {
			continue
		}
		bs := kv.BlockSize(e)
		if src.Type == "approximate" {
			bs = cmp.Or(src.BlockSize, prefix.DefaultBlockSize)
		}
		engines[bs] = append(engines[bs], prefix.Engine{ID: e.ID, Model: e.Model})
	}
	s := &speculative{bySize: map[int]*prefix.Approx{}}
	for bs, es := range engines {
		cfg := prefix.Config{CapacityTokens: prefix.DefaultCapacityTokens, TTL: time.Duration(src.SpeculativeTTLMS) * time.Millisecond, BlockSize: bs}
		s.bySize[bs] = prefix.New(cfg, es, clock)
	}
	return s
}

// newSpeculatives returns the speculative entries of every source of the plan's
// cache-aware policies that asks for them.
func newSpeculatives(p *plan.Plan, clock func() time.Time) map[plan.PrefixSource]*speculative {
	out := map[plan.PrefixSource]*speculative{}
	for _, src := range cacheSources(p) {
		if out[src] == nil {
			if s := newSpeculative(p, src, clock); s != nil {
				out[src] = s
			}
		}
	}
	return out
}

// lookup adds the speculative matches of the prompt to res.
func (s *speculative) lookup(res *PrefixResult, model string, h *BlockHashes) {
	for bs, a := range s.bySize {
		addApprox(res, a.Lookup(model, h.Of(bs)), bs)
	}
}

// RecordSpeculative records that a request of the prompt is being dispatched to the
// engine, for the sources with speculative entries. The server calls it when dispatch
// starts, before the engine has stored anything, with the prefill engine for PD.
func (d Deps) RecordSpeculative(engineID string, h *BlockHashes) {
	for _, s := range d.speculative {
		for bs, a := range s.bySize {
			if hs := h.Of(bs); a.Has(engineID) && hs != nil {
				a.Insert(engineID, hs)
			}
		}
	}
}

// SpeculativeBlocks is how many speculative entries the engine has across sources, for
// /admin/state; ok is false when no source keeps speculative entries for it.
func (d Deps) SpeculativeBlocks(engineID string) (blocks int, tokens int64, ok bool) {
	for _, s := range d.speculative {
		for bs, a := range s.bySize {
			if a.Has(engineID) {
				n := a.Blocks(engineID)
				blocks, tokens, ok = blocks+n, tokens+int64(n)*int64(bs), true
			}
		}
	}
	return blocks, tokens, ok
}

// speculativeSource is a source with its speculative entries: a prefix is the longer of
// what the source's index says and what the router guessed.
type speculativeSource struct {
	src  CacheSource // localSource or approxSource: comparable, as the memo needs
	spec *speculative
}

func (s speculativeSource) Name() string { return s.src.Name() }

func (s speculativeSource) Lookup(ctx context.Context, model string, ids []uint32) (PrefixResult, error) {
	h := NewBlockHashes(ids) // shared by both lookups
	var res PrefixResult
	switch src := s.src.(type) {
	case localSource:
		for _, bs := range src.ix.BlockSizes(model) {
			if hs := h.Of(bs); hs != nil {
				res.add(src.ix.LookupHashes(hs, bs), bs)
			}
		}
	case approxSource:
		bs := src.a.BlockSize()
		addApprox(&res, src.a.Lookup(model, h.Of(bs)), bs)
	default:
		var err error
		if res, err = s.src.Lookup(ctx, model, ids); err != nil {
			return res, err
		}
	}
	s.spec.lookup(&res, model, h)
	return res, nil
}
