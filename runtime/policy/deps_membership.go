package policy

import (
	"cmp"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/prefix"
)

// Next returns the policy state of a reloaded plan, keeping what the running one learned
// wherever the plan lets it: the load table, the local prefix index and each approximate
// source's index carry over (a source whose settings changed starts empty), and so do the
// affinity stores unless a model's binding settings changed or a model came or went, which
// starts every binding afresh. Remote indexer clients are rebuilt; speculative entries,
// guesses that expire within their TTL anyway, start empty.
//
// Next changes nothing the running plan uses, so a reload that fails later leaves it
// whole. Committing the reload is the caller's: DropEngine for each engine that left or
// changed, then AddEngine for each engine that came or changed.
func (d Deps) Next(p *plan.Plan, clock func() time.Time) (Deps, error) {
	indexers, err := kv.NewRemotes(p, &http.Client{})
	if err != nil {
		return Deps{}, err
	}
	next := Deps{Load: d.Load, Rand: d.Rand, Affinity: d.Affinity, KV: d.KV, Indexers: indexers, Clock: clock,
		Approx: map[plan.PrefixSource]*prefix.Approx{}, speculative: newSpeculatives(p, clock)}
	if d.Affinity == nil || AffinityChanged(d.plan, p) {
		next.Affinity = affinity.FromPlan(p, clock)
	}
	fresh := newApproxIndexes(p, d.Load, clock)
	for src, a := range fresh {
		if old := d.Approx[src]; old != nil {
			a = old
		}
		next.Approx[src] = a
	}
	next.shared = newSharedIndexes(next.Approx, next.Affinity)
	next.plan = p
	return next, nil
}

// AffinityChanged reports whether the binding settings of two plans differ, so that the
// affinity stores of old cannot serve new: a model added or removed, a model's idle or
// eviction settings, the key cap or the binding store.
func AffinityChanged(old, new *plan.Plan) bool {
	if old == nil || new == nil {
		return true
	}
	return !reflect.DeepEqual(affinitySettings(old), affinitySettings(new))
}

func affinitySettings(p *plan.Plan) []string {
	out := []string{fmt.Sprint(p.State.AffinityMaxKeys), fmt.Sprintf("%+v", p.Bindings)}
	if p.Bindings != nil {
		out[1] = fmt.Sprintf("%+v", *p.Bindings)
	}
	for _, m := range p.Models {
		out = append(out, fmt.Sprint(m.Name, m.SessionIdleSecs, m.StickyIdleSecs, m.SessionEvictionIntervalSecs, m.StickyEvictionIntervalSecs))
	}
	return out
}

// AddEngine starts tracking a new engine in the local prefix index, every approximate
// index of its model's engines and the speculative entries of its page size (an engine
// whose page size no engine had before gets none until the next reload). An engine
// already tracked keeps what it holds.
func (d Deps) AddEngine(e plan.Engine) {
	if d.KV != nil {
		d.KV.AddEngine(e)
	}
	if e.Role == plan.RoleDecode {
		return
	}
	pe := prefix.Engine{ID: e.ID, Model: e.Model}
	for _, a := range d.Approx {
		a.AddEngine(pe)
	}
	for src, s := range d.speculative {
		if src.Type == "local_index" && e.KVEvents == nil {
			continue
		}
		bs := kv.BlockSize(e)
		if src.Type == "approximate" {
			bs = cmp.Or(src.BlockSize, prefix.DefaultBlockSize)
		}
		if a := s.bySize[bs]; a != nil {
			a.AddEngine(pe)
		}
	}
}

// DropEngine forgets an engine that left: its bindings, what every prefix index holds for
// it, and its place in them. Stop its KV-event subscription first (see kv.Index.DropEngine).
func (d Deps) DropEngine(id string) {
	if d.Affinity != nil {
		d.Affinity.RemoveEngine(id)
	}
	if d.KV != nil {
		d.KV.DropEngine(id)
	}
	for _, a := range d.Approx {
		a.DropEngine(id)
	}
	for _, s := range d.speculative {
		for _, a := range s.bySize {
			a.DropEngine(id)
		}
	}
}
