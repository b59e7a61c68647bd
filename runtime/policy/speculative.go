package policy

import (
	"context"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/prefix"
	"github.com/routerkit/router/runtime/token"
)

// Speculative entries close the gap between a pick and the engine's KV events about it
// (llm-d's speculativeIndexing, 2 s by default): an event-fed index learns of a prompt
// only after the engine has computed it and its BlockStored has crossed the network, so
// a burst of identical prompts sent meanwhile all miss and the load fallback scatters
// them over the group, each engine computing the same prefix. With speculative_ttl_ms
// set, the router records each dispatched prompt as held by its engine for that long;
// the engine's own events then confirm it in the local index, where it lives as long as
// the engine keeps it. A prompt the engine never stores (it failed, or evicted the pages
// at once) stops attracting requests when the entry expires.
//
// Speculative entries live in approximate indexes of their own, one per page size of the
// engines publishing events, never in the event-fed index, so events and guesses never
// overwrite each other.
type speculative struct {
	bySize map[int]*prefix.Approx
}

// newSpeculative returns the speculative entries of one local_index source, or nil when
// the source has none.
func newSpeculative(p *plan.Plan, src plan.PrefixSource, clock func() time.Time) *speculative {
	if src.SpeculativeTTLMS <= 0 {
		return nil
	}
	engines := map[int][]prefix.Engine{}
	for _, e := range p.Engines {
		if e.KVEvents != nil && e.Role != plan.RoleDecode {
			bs := kv.BlockSize(e)
			engines[bs] = append(engines[bs], prefix.Engine{ID: e.ID, Model: e.Model})
		}
	}
	s := &speculative{bySize: map[int]*prefix.Approx{}}
	for bs, es := range engines {
		cfg := prefix.Config{CapacityTokens: prefix.DefaultCapacityTokens, TTL: time.Duration(src.SpeculativeTTLMS) * time.Millisecond, BlockSize: bs}
		s.bySize[bs] = prefix.New(cfg, es, clock)
	}
	return s
}

// newSpeculatives returns the speculative entries of every local_index source of the
// plan's cache-aware policies that asks for them.
func newSpeculatives(p *plan.Plan, clock func() time.Time) map[plan.PrefixSource]*speculative {
	out := map[plan.PrefixSource]*speculative{}
	for _, src := range cacheSources(p) {
		if src.Type == "local_index" && out[src] == nil {
			if s := newSpeculative(p, src, clock); s != nil {
				out[src] = s
			}
		}
	}
	return out
}

// lookup adds the speculative matches of ids to res.
func (s *speculative) lookup(res *PrefixResult, model string, ids []uint32) {
	if s == nil {
		return
	}
	for bs, a := range s.bySize {
		if len(ids) < bs {
			continue
		}
		for _, m := range a.Lookup(model, token.BlockHashes(ids, bs)) {
			res.add([]kv.Match{{Engine: m.Engine, Blocks: m.Blocks}}, bs)
		}
	}
}

// RecordSpeculative records that a request of the prompt ids is being dispatched to the
// engine, for the local_index sources with speculative entries. The server calls it when
// dispatch starts, before the engine has stored anything, with the prefill engine for PD.
func (d Deps) RecordSpeculative(engineID string, ids []uint32) {
	for _, s := range d.speculative {
		for bs, a := range s.bySize {
			if a.Has(engineID) && len(ids) >= bs {
				a.Insert(engineID, token.BlockHashes(ids, bs))
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

// speculativeSource is the local index with a source's speculative entries: a prefix is
// the longer of what the events say and what the router guessed.
type speculativeSource struct {
	local localSource
	spec  *speculative
}

func (speculativeSource) Name() string { return "local_index" }

func (s speculativeSource) Lookup(ctx context.Context, model string, ids []uint32) (PrefixResult, error) {
	res, err := s.local.Lookup(ctx, model, ids)
	if err != nil {
		return res, err
	}
	s.spec.lookup(&res, model, ids)
	return res, nil
}
