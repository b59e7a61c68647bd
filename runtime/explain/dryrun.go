package explain

import (
	"context"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/selection"
	"github.com/routerkit/router/runtime/state/load"
)

// Run is the one explain driver, for `router explain` and a serving router's
// /admin/explain alike: it runs model m's selection for facts exactly as serving would,
// traced and as a dry run (no affinity binding is written), over the engines in reg and
// the load in table at now, and explains the outcome. peakErr, when set, is the
// expected-peak failure that stops selection before it starts, explained like any other
// selection failure. With tokens, the explanation shows how facts.TokenIDs hash into the
// prefix indexes' pages (deps.KV's block sizes).
func Run(ctx context.Context, m *selection.Model, facts *policy.Facts, peakErr error, deps policy.Deps,
	reg *engine.Registry, table *load.Table, now time.Time, tokens bool) *Explanation {
	trace := &decision.Trace{}
	var sel bucket.Selection
	err := peakErr
	if err == nil {
		sel, err = m.Resolver.Route(ctx, facts, &policy.Pass{Trace: trace, DryRun: true})
	}
	x := New(facts, trace, sel, err, reg, table, now)
	if tokens {
		x.SetTokens(m.TokName, facts.TokenIDs, deps.KV.BlockSizes(facts.Model))
	}
	return x
}
