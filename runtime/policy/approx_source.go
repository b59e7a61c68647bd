package policy

import (
	"context"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/state/prefix"
	"github.com/routerkit/router/runtime/token"
)

// Approximate returns the source reading an approximate prefix index, which the router
// feeds with its own dispatches (Deps.RecordDispatch) instead of KV events, and, when
// shared is not nil, the other replicas' claims of the same index (Deps.ClaimDispatch).
func Approximate(a *prefix.Approx, shared *prefix.Shared) CacheSource {
	return approxSource{a, shared}
}

type approxSource struct {
	a      *prefix.Approx
	shared *prefix.Shared // nil: this replica's dispatches only
}

func (approxSource) Name() string { return "approximate" }

func (s approxSource) Lookup(_ context.Context, model string, ids []uint32) (PrefixResult, error) {
	var res PrefixResult
	bs := s.a.BlockSize()
	if len(ids) < bs {
		return res, nil
	}
	hashes := token.BlockHashes(ids, bs)
	if s.shared == nil {
		addApprox(&res, s.a.Lookup(model, hashes), bs)
		return res, nil
	}
	ms, ok := s.shared.Lookup(model, hashes)
	addApprox(&res, ms, bs)
	if !ok {
		// The store is down: the replica's own entries still answer, so the result is
		// not unavailable, but the trace says what it lacks.
		res.Detail = "shared store down: this replica's dispatches only"
	}
	return res, nil
}

// addApprox records an approximate index's matches of blocks of size bs, in tokens.
func addApprox(res *PrefixResult, ms []prefix.Match, bs int) {
	for _, m := range ms {
		res.add([]kv.Match{{Engine: m.Engine, Blocks: m.Blocks}}, bs)
	}
}

// newApproxIndexes returns one approximate index per distinct approximate prefix source
// of the plan's cache-aware policies, so that every policy naming a source shares its
// index. Each index tracks the plan's plain and prefill engines: any dispatch fills an
// engine's KV cache, whichever group chose it. Without capacity_tokens, each engine's
// entry is sized by the KV capacity the engine reports in table.
func newApproxIndexes(p *plan.Plan, table *load.Table, clock func() time.Time) map[plan.PrefixSource]*prefix.Approx {
	out := map[plan.PrefixSource]*prefix.Approx{}
	var engines []prefix.Engine
	for _, e := range p.Engines {
		if e.Role != plan.RoleDecode {
			engines = append(engines, prefix.Engine{ID: e.ID, Model: e.Model})
		}
	}
	for _, src := range cacheSources(p) {
		if src.Type != "approximate" || out[src] != nil {
			continue
		}
		cfg := prefix.Config{CapacityTokens: src.CapacityTokens, TTL: time.Duration(src.TTLSecs) * time.Second,
			BlockSize: src.BlockSize, Reported: table.KVCapacity}
		out[src] = prefix.New(cfg, engines, clock)
	}
	return out
}

// cacheSources lists the prefix sources of the plan's cache-aware attachments, in plan
// order, with repeats.
func cacheSources(p *plan.Plan) []plan.PrefixSource {
	var out []plan.PrefixSource
	for _, m := range p.Models {
		for _, b := range m.Buckets {
			var groups []*plan.Group
			if b.Groups.Plain != nil {
				groups = append(groups, b.Groups.Plain)
			}
			if b.Groups.PD != nil {
				groups = append(groups, &b.Groups.PD.Prefill)
			}
			for _, g := range groups {
				if g.Policy.Type == plan.CacheAware && g.Policy.PrefixSource != nil {
					out = append(out, *g.Policy.PrefixSource)
				}
			}
		}
	}
	return out
}

// RecordDispatch tells the approximate indexes that the engine served a request of the
// prompt: it now probably holds its prefix. The server calls it after a successful
// dispatch, with the prefill engine for a PD request; a request that failed teaches
// nothing, so an engine that refuses work does not attract more of it.
func (d Deps) RecordDispatch(engineID string, h *BlockHashes) {
	for _, a := range d.Approx {
		if hs := h.Of(a.BlockSize()); a.Has(engineID) && hs != nil {
			a.Insert(engineID, hs)
		}
	}
}

// Learns reports whether any prefix index learns from dispatches (RecordSpeculative,
// RecordDispatch), so that a router without one does not hash prompts for nothing.
func (d Deps) Learns() bool { return len(d.Approx) > 0 || len(d.speculative) > 0 }
