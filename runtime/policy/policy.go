// Package policy implements engine selection within one engine group (spec §4–5): the
// Policy contract, its typed outcomes, per-engine admission, and one file per policy.
//
// A policy is built once per group from the plan and reused across requests. It owns its
// state handles (the load table, its randomness) and reads observations itself; callers
// supply only the candidates and the request's facts. A policy never chooses another
// bucket, never crosses the PD role boundary and never returns an engine outside the
// candidates it was given.
package policy

import (
	"context"
	"fmt"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// Policy selects one engine from a group's candidates.
//
// engines are the group's healthy members sorted by id; the slice is shared and must not
// be modified or retained. The returned engine must be one of them and must have passed
// admission. Failures are the typed errors of this package.
type Policy interface {
	Pick(ctx context.Context, engines []*engine.Worker, req *Request) (Pick, error)
}

// Facts are a request's routing facts, prepared once by the handler and passed unchanged
// to every group the request visits.
type Facts struct {
	Model string

	InputTokens int64
	// ExpectedPeak is input plus requested output tokens; meaningful only when PeakKnown.
	ExpectedPeak int64
	PeakKnown    bool

	// TokenIDs are the prompt's token ids when the router tokenized it, else nil.
	TokenIDs []uint32

	SessionKey string
	RoutingKey string
}

// Request is one group call: the request's facts plus the bucket and stage asking. It
// holds no HTTP state, load observations or state handles.
type Request struct {
	Facts
	// Stage is the role of the group being asked: plain, prefill or decode.
	Stage    plan.Role
	BucketID string
}

// Pick is a successful selection: an admitted engine from the candidates and a short
// reason for traces and metrics.
type Pick struct {
	Engine *engine.Worker
	Reason string
}

// Deps are the shared state handles policies may need. Build them once per router.
type Deps struct {
	// Load is the engine-reported load table. With a nil table every report is unknown:
	// load-aware policies fall back to router-local in-flight counts and reported-metric
	// caps fail open.
	Load *load.Table
	// Rand is the randomness source; nil uses a fast process-wide source. Inject a seeded
	// source for repeatable choices.
	Rand Rand
}

// New builds the policy a plan attachment describes.
func New(p plan.Policy, deps Deps) (Policy, error) {
	rnd := deps.Rand
	if rnd == nil {
		rnd = sharedRand{}
	}
	limits := Limits(p.Admission)
	switch p.Type {
	case plan.RoundRobin:
		return NewRoundRobin(deps.Load, limits), nil
	case plan.Random:
		return NewRandom(deps.Load, rnd, limits), nil
	case plan.PowerOfTwo:
		return NewPowerOfTwo(deps.Load, rnd, limits), nil
	case plan.LoadBased:
		return NewLeastLoad(deps.Load, rnd, limits), nil
	case plan.SessionAware, plan.Sticky, plan.CacheAware:
		return nil, &InvalidConfiguration{Msg: fmt.Sprintf(
			"policy %s is not implemented yet; use round_robin, random, power_of_two or load_based", p.Type)}
	default:
		return nil, &InvalidConfiguration{Msg: fmt.Sprintf("unknown policy type %q", p.Type)}
	}
}

// noCandidates is the outcome every policy returns for an empty candidate set, before
// reading any load or invoking admission.
func noCandidates(req *Request) (Pick, error) {
	return Pick{}, &NoCandidates{Stage: req.Stage}
}
