package policy

import (
	"net/http"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/load"
)

// NewDeps builds a router's shared policy state from its plan, once: the affinity stores
// of every model, an empty local prefix index for the engines that publish KV events, one
// client per remote prefix indexer and one empty index per approximate prefix source.
// table and rnd are used as given (nil rnd is the fast process-wide source). clock is the
// time source of the affinity stores and the approximate indexes, nil for time.Now.
//
// NewDeps starts nothing. A serving router also runs, for as long as it serves:
//
//	go deps.Affinity.Run(ctx)                      // sweeps idle bindings
//	sub, err := kv.Subscribe(ctx, p, deps.KV, log) // feeds the prefix index
//	h := policy.NewBlockHashes(ids)                // per dispatch, shared by:
//	deps.RecordSpeculative(engineID, h)            // as the dispatch starts
//	deps.ClaimDispatch(engineID, h)                // likewise, to other replicas
//	deps.RecordDispatch(engineID, h)               // after it succeeded
//	deps.UnclaimDispatch(engineID, h)              // or failed
//
// A caller that adds a worker to the registry calls deps.AddEngine, and one that removes a
// worker calls deps.DropEngine once nothing dispatches to it; a reload builds its state
// with deps.Next, which keeps what the engines that stay have learned. A remote indexer's endpoint scheme is
// checked here, so an unsupported one fails at startup.
func NewDeps(p *plan.Plan, table *load.Table, rnd Rand, clock func() time.Time) (Deps, error) {
	indexers, err := kv.NewRemotes(p, &http.Client{})
	if err != nil {
		return Deps{}, err
	}
	d := Deps{
		Load:     table,
		Rand:     rnd,
		Affinity: affinity.FromPlan(p, clock),
		KV:       kv.NewIndex(p),
		Indexers: indexers,
		Approx:   newApproxIndexes(p, table, clock),
		Clock:    clock,

		speculative: newSpeculatives(p, clock),
		plan:        p,
	}
	d.shared = newSharedIndexes(d.Approx, d.Affinity)
	return d, nil
}
