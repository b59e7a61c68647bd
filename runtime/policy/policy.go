// Package policy implements engine selection within one engine group (docs/design.md,
// Policies and Admission): the Policy contract, its typed outcomes, per-engine admission,
// and one file per policy.
//
// A policy is built once per group from the plan and reused across requests. It owns its
// state handles (the load table, affinity bindings, its randomness) and reads
// observations itself; callers
// supply only the candidates and the request's facts. A policy never chooses another
// bucket, never crosses the PD role boundary and never returns an engine outside the
// candidates it was given.
package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/slo"
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/state/prefix"
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

	// SLO are the request's latency targets. Only bucket ordering reads them; policies
	// choose within a bucket and ignore them.
	SLO slo.Targets

	// Avoid lists engines this request must not be given again: a retry before send
	// leaves out the engines that refused it. Groups drop them from their candidates.
	Avoid []*engine.Worker
}

// Request is one group call: the request's facts plus the bucket and stage asking. It
// holds no HTTP state, load observations or state handles.
type Request struct {
	Facts
	// Stage is the role of the group being asked: plain, prefill or decode.
	Stage    plan.Role
	BucketID string
	// Pass is the selection pass the request is in; nil records nothing and is no dry
	// run.
	Pass *Pass
}

// Pick is a successful selection: an admitted engine from the candidates and a short
// reason for traces and metrics.
type Pick struct {
	Engine *engine.Worker
	Reason string
	// PrefixTokens is how many of the request's tokens the engine holds as a cached
	// prefix, when the policy picked it for that (cache-aware); 0 otherwise. The
	// router's span reports it.
	PrefixTokens int64
}

// Deps are the shared state handles policies may need. Build them once per router with
// NewDeps. The zero value works too, with the limitations each field describes, which
// suits tests.
type Deps struct {
	// Load is the engine-reported load table. With a nil table every report is unknown:
	// load-aware policies fall back to router-local in-flight counts and reported-metric
	// caps fail open.
	Load *load.Table
	// Rand is the randomness source; nil uses a fast process-wide source. Inject a seeded
	// source for repeatable choices.
	Rand Rand
	// Affinity holds every model's session and routing-key bindings. With nil, each
	// session or sticky policy gets a private store with the default idle timeout that
	// nothing sweeps: enough for tests and for dry runs, which write no binding.
	Affinity *affinity.Stores
	// KV is the local prefix index fed by KV events. With nil, every local lookup misses
	// and cache-aware policies place every request by their load fallback.
	KV *kv.Index
	// Indexers are the remote prefix-indexer clients, one per prefix source, shared so
	// that every policy using a source shares its in-flight limit. A cache-aware
	// attachment with a remote_indexer source needs its client here.
	Indexers map[plan.PrefixSource]*kv.Remote
	// Approx are the approximate prefix indexes, one per approximate prefix source, fed by
	// RecordDispatch. A cache-aware attachment with an approximate source needs its index
	// here.
	Approx map[plan.PrefixSource]*prefix.Approx
	// Clock is the time source of the buckets' learned SLO estimates; nil is time.Now.
	Clock func() time.Time

	// shared holds the approximate indexes that replicas share through the binding store
	// (prefix_source.share "store"), fed by ClaimDispatch.
	shared map[plan.PrefixSource]*prefix.Shared
	// speculative holds the speculative entries of the local_index and approximate sources
	// that ask for them, fed by RecordSpeculative.
	speculative map[plan.PrefixSource]*speculative
	// plan is the plan the state was built for, which Next compares a reloaded one with.
	plan *plan.Plan
}

// New builds the policy a plan attachment of the model describes.
func New(model string, p plan.Policy, deps Deps) (Policy, error) {
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
	case plan.SessionAware:
		store, err := affinityStore(deps.Affinity, (*affinity.Stores).Session, model)
		if err != nil {
			return nil, err
		}
		return NewSessionAware(store, deps.Load, rnd, limits), nil
	case plan.Sticky:
		store, err := affinityStore(deps.Affinity, (*affinity.Stores).Sticky, model)
		if err != nil {
			return nil, err
		}
		return NewSticky(store, deps.Load, rnd, limits, p.Fallback)
	case plan.CacheAware:
		src, err := cacheSource(p.PrefixSource, deps)
		if err != nil {
			return nil, err
		}
		return NewCacheAware(src, deps.Load, rnd, limits, p), nil
	default:
		return nil, &InvalidConfiguration{Msg: fmt.Sprintf("unknown policy type %q", p.Type)}
	}
}

// affinityStore returns the model's store from the shared stores, or a private one when
// there are none.
func affinityStore(stores *affinity.Stores, of func(*affinity.Stores, string) affinity.Bindings, model string) (affinity.Bindings, error) {
	if stores == nil {
		return affinity.NewStore(affinity.DefaultIdle, nil), nil
	}
	if s := of(stores, model); s != nil {
		return s, nil
	}
	return nil, &InvalidConfiguration{Msg: fmt.Sprintf("no affinity store for model %q: the shared stores were built from another plan", model)}
}

// cacheSource returns the shared source a cache-aware attachment reads, with its
// speculative entries when it asks for them.
func cacheSource(src *plan.PrefixSource, deps Deps) (CacheSource, error) {
	base, err := baseSource(src, deps)
	if err != nil || src == nil || src.SpeculativeTTLMS <= 0 {
		return base, err
	}
	spec := deps.speculative[*src]
	if spec == nil {
		return nil, &InvalidConfiguration{Msg: fmt.Sprintf("no speculative entries for the %s prefix source: build Deps with NewDeps", src.Type)}
	}
	return speculativeSource{base, spec}, nil
}

// baseSource returns the source's own index or client.
func baseSource(src *plan.PrefixSource, deps Deps) (CacheSource, error) {
	if src == nil || src.Type == "" || src.Type == "local_index" {
		return LocalIndex(deps.KV), nil
	}
	if src.Type == "approximate" {
		a := deps.Approx[*src]
		if a == nil {
			return nil, &InvalidConfiguration{Msg: "no index for the approximate prefix source: build Deps with NewDeps"}
		}
		return Approximate(a, deps.shared[*src]), nil
	}
	if src.Type != "remote_indexer" {
		return nil, &InvalidConfiguration{Msg: fmt.Sprintf("unknown prefix source type %q", src.Type)}
	}
	r := deps.Indexers[*src]
	if r == nil {
		return nil, &InvalidConfiguration{Msg: fmt.Sprintf("no client for the remote prefix indexer %s: build Deps with NewDeps", src.Endpoint)}
	}
	return RemoteIndexer(r), nil
}

// noCandidates is the outcome every policy returns for an empty candidate set, before
// reading any load or invoking admission.
func noCandidates(req *Request) (Pick, error) {
	return Pick{}, &NoCandidates{Stage: req.Stage}
}
