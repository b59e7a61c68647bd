package policy

import (
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/prefix"
)

// newSharedIndexes returns, for each approximate source of the plan with share "store",
// its index shared through the binding store of stores. Without a shared binding store
// (a plan built in code; the compiler refuses one from a file) the source keeps its
// index to itself, as a replica does while the store is down.
func newSharedIndexes(approx map[plan.PrefixSource]*prefix.Approx, stores *affinity.Stores) map[plan.PrefixSource]*prefix.Shared {
	out := map[plan.PrefixSource]*prefix.Shared{}
	if stores == nil || stores.Remote() == nil {
		return out
	}
	for src, a := range approx {
		if src.Share == plan.ShareStore {
			ttl := time.Duration(src.TTLSecs) * time.Second
			out[src] = prefix.NewShared(a, affinity.NewPrefixes(stores.Remote(), ttl))
		}
	}
	return out
}

// ClaimDispatch tells the other replicas, through the shared approximate indexes, that the
// engine is about to serve the prompt. The server calls it as the dispatch starts, with
// the prefill engine for a PD request, so the prompt's next turn finds the engine on any
// replica; it waits for the store, at most the binding store's timeout_ms.
func (d Deps) ClaimDispatch(engineID string, h *BlockHashes) {
	for _, s := range d.shared {
		s.Claim(engineID, h.Of(s.Local().BlockSize()))
	}
}

// UnclaimDispatch withdraws ClaimDispatch's claims for a dispatch that failed.
func (d Deps) UnclaimDispatch(engineID string, h *BlockHashes) {
	for _, s := range d.shared {
		s.Unclaim(engineID, h.Of(s.Local().BlockSize()))
	}
}
