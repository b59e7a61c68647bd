// Package bucket implements bucket-first engine selection (docs/design.md, Buckets and
// Groups): the Resolver that orders a model's length-compatible buckets, each Bucket's
// complete plain or prefill/decode selection, each Group's candidate filtering and policy
// call, and Route, the handler's loop over buckets that serving and `router explain` share.
package bucket

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/slo"
)

// Resolver owns one model's buckets. It orders them once, at construction, by input
// capacity, rank and id; resolving a request only filters that order, and a request with
// latency targets under the model's SLO preferences reorders the compatible ones by
// penalty, keeping that order among equals.
type Resolver struct {
	model   string
	buckets []*Bucket // in the design's try order
	// prefs are the model's SLO preferences; a request's targets reorder the buckets
	// when one of them is enabled.
	prefs plan.SLOPreferences
	// prefix is set when a group uses cache_aware, whose prefix lookups a pass memoizes.
	prefix bool
}

// Bucket is a token-length class with its engine groups: one plain group, or a complete
// prefill/decode pair. Both engines of a PD selection come from the same bucket.
type Bucket struct {
	id         string
	rank       int
	minInput   int64
	maxInput   int64          // math.MaxInt64 when unbounded
	maxContext int64          // math.MaxInt64 when unbounded
	capacity   int64          // min(maxInput, maxContext): the sort key
	est        *slo.Estimates // nil: no estimate, which meets no target

	plain           *Group
	prefill, decode *Group
}

// ID returns the bucket's configured id.
func (b *Bucket) ID() string { return b.id }

// PD reports whether the bucket selects a prefill/decode pair rather than one plain engine.
func (b *Bucket) PD() bool { return b.plain == nil }

// NewResolver builds a model's buckets and their group policies from the plan. Policies
// get deps; candidates come from reg on every pick.
func NewResolver(m plan.Model, reg *engine.Registry, deps policy.Deps) (*Resolver, error) {
	r := &Resolver{model: m.Name, prefs: m.SLO}
	for _, pb := range m.Buckets {
		b, err := newBucket(m.Name, pb, reg, deps)
		if err != nil {
			return nil, fmt.Errorf("model %s: bucket %s: %w", m.Name, pb.ID, err)
		}
		b.est = slo.NewEstimates(pb.Estimates, deps.Clock)
		r.buckets = append(r.buckets, b)
		for _, g := range []*Group{b.plain, b.prefill} {
			r.prefix = r.prefix || g != nil && g.policyType == plan.CacheAware
		}
	}
	slices.SortStableFunc(r.buckets, func(a, b *Bucket) int {
		return cmp.Or(cmp.Compare(a.capacity, b.capacity), cmp.Compare(a.rank, b.rank), cmp.Compare(a.id, b.id))
	})
	return r, nil
}

// Buckets returns the model's buckets in the design's order (capacity, rank, id); serving
// lists their SLO estimates and feeds them observations.
func (r *Resolver) Buckets() []*Bucket { return r.buckets }

func newBucket(model string, pb plan.Bucket, reg *engine.Registry, deps policy.Deps) (*Bucket, error) {
	b := &Bucket{id: pb.ID, rank: pb.Rank, minInput: pb.Limits.Min, maxInput: orUnbounded(pb.Limits.Max), maxContext: orUnbounded(pb.MaxContextTokens)}
	b.capacity = min(b.maxInput, b.maxContext)
	var err error
	switch g := pb.Groups; {
	case g.Plain != nil && g.PD == nil:
		b.plain, err = newGroup(model, pb.ID, plan.RolePlain, *g.Plain, reg, deps)
	case g.PD != nil && g.Plain == nil:
		if b.prefill, err = newGroup(model, pb.ID, plan.RolePrefill, g.PD.Prefill, reg, deps); err == nil {
			b.decode, err = newGroup(model, pb.ID, plan.RoleDecode, g.PD.Decode, reg, deps)
		}
	default:
		err = &policy.InvalidConfiguration{Msg: "a bucket needs exactly one of a plain group or a prefill/decode pair"}
	}
	return b, err
}

func orUnbounded(v *int64) int64 {
	if v == nil {
		return math.MaxInt64
	}
	return *v
}

// Resolution is the outcome of resolving one request: the compatible buckets in try
// order, and every other bucket with the reason it was excluded.
type Resolution struct {
	Buckets  []*Bucket
	Excluded []Exclusion
}

// Exclusion is a bucket that cannot take the request.
type Exclusion struct {
	Bucket *Bucket
	Reason string
}

// Resolve returns the buckets whose inclusive input range contains inputTokens and whose
// context capacity holds the expected peak (input plus requested output) when known, or
// the input alone when the output budget is unknown. The order is ascending input
// capacity, unbounded last, then rank, then id. A known peak below the input is an
// InvalidSignal. An empty result is not an error here; the caller maps it to
// no_matching_bucket.
func (r *Resolver) Resolve(inputTokens, expectedPeak int64, peakKnown bool) (Resolution, error) {
	var res Resolution
	if err := validate(inputTokens, expectedPeak, peakKnown); err != nil {
		return res, err
	}
	need := contextNeed(inputTokens, expectedPeak, peakKnown)
	res.Buckets = make([]*Bucket, 0, len(r.buckets))
	for _, b := range r.buckets {
		if f := b.fit(inputTokens, need); f != fits {
			res.Excluded = append(res.Excluded, Exclusion{Bucket: b, Reason: b.describe(f, inputTokens, need, peakKnown)})
			continue
		}
		res.Buckets = append(res.Buckets, b)
	}
	return res, nil
}

func validate(inputTokens, expectedPeak int64, peakKnown bool) error {
	if inputTokens < 0 {
		return &policy.InvalidSignal{Msg: fmt.Sprintf("negative input length %d", inputTokens)}
	}
	if peakKnown && expectedPeak < inputTokens {
		return &policy.InvalidSignal{Msg: fmt.Sprintf("expected peak %d is below the input length %d", expectedPeak, inputTokens)}
	}
	return nil
}

// contextNeed is what a bucket's context capacity must hold.
func contextNeed(inputTokens, expectedPeak int64, peakKnown bool) int64 {
	if peakKnown {
		return expectedPeak
	}
	return inputTokens
}

type fit uint8

const (
	fits fit = iota
	belowMin
	aboveMax
	overContext
)

func (b *Bucket) fit(input, need int64) fit {
	switch {
	case input < b.minInput:
		return belowMin
	case input > b.maxInput:
		return aboveMax
	case need > b.maxContext:
		return overContext
	}
	return fits
}

func (b *Bucket) describe(f fit, input, need int64, peakKnown bool) string {
	switch f {
	case belowMin:
		return fmt.Sprintf("input %d tokens is below limits.min %d", input, b.minInput)
	case aboveMax:
		return fmt.Sprintf("input %d tokens is above limits.max %d", input, b.maxInput)
	case overContext:
		if peakKnown {
			return fmt.Sprintf("expected peak %d tokens (input plus requested output) exceeds max_context_tokens %d", need, b.maxContext)
		}
		return fmt.Sprintf("input %d tokens exceeds max_context_tokens %d (output budget unknown)", need, b.maxContext)
	}
	return ""
}
