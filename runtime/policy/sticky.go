package policy

import (
	"fmt"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/load"
)

// Sticky pins a routing key, taken from the model's routing-key header, to one engine per
// model, bucket and stage (docs/design.md, Policies). It follows the same binding rules as
// SessionAware (see binder) with a configurable fallback for new, missing or displaced
// keys: round_robin (the default), random, power_of_two or load_based. The fallback runs
// with default (no) limits and owns its own cursor or randomness; Sticky checks the engine
// it returns with its own limits.
type Sticky struct {
	binder
}

// NewSticky returns a sticky policy binding in store, which the caller owns along with its
// idle expiry and sweeping.
func NewSticky(store affinity.Bindings, table *load.Table, rnd Rand, limits Limits, fallback plan.PolicyType) (*Sticky, error) {
	var fb Policy
	switch fallback {
	case plan.RoundRobin, "":
		fallback, fb = plan.RoundRobin, NewRoundRobin(table, Limits{})
	case plan.Random:
		fb = NewRandom(table, rnd, Limits{})
	case plan.PowerOfTwo:
		fb = NewPowerOfTwo(table, rnd, Limits{})
	case plan.LoadBased:
		fb = NewLeastLoad(table, rnd, Limits{})
	default:
		return nil, &InvalidConfiguration{Msg: fmt.Sprintf(
			"sticky fallback %q is not one of round_robin, random, power_of_two, load_based", fallback)}
	}
	return &Sticky{binder{
		store:    store,
		load:     table,
		limits:   limits,
		fallback: fb,
		key:      func(r *Request) string { return r.RoutingKey },
		reasons: bindReasons{
			noKey:      fmt.Sprintf("no routing key; %s fallback, not bound", fallback),
			reused:     "routing-key binding reused",
			bound:      fmt.Sprintf("new routing key bound to the %s choice", fallback),
			rebound:    "routing key rebound: its engine left the group",
			concurrent: "routing key bound by a concurrent request first",
			unbound:    fmt.Sprintf("routing-key binding contended; %s choice not bound", fallback),
			dryRun:     fmt.Sprintf("new routing key; %s choice (dry run, not bound)", fallback),
		},
	}}, nil
}
