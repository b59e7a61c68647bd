package bucket

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
)

// Selection is a complete engine selection from one bucket: Plain for a plain bucket, or
// Prefill and Decode for a PD bucket. Engines of the other kind are zero.
type Selection struct {
	Bucket  *Bucket
	Plain   policy.Pick
	Prefill policy.Pick
	Decode  policy.Pick
	// SLOTTFT and SLOTPS say whether the bucket's estimate meets the request's TTFT and
	// TPS targets: SLOMet, SLOMissed, or SLONone when the request has no such target or
	// its preference is disabled.
	SLOTTFT, SLOTPS string
}

// PickEngines asks the bucket's groups for a complete selection: the plain group, or the
// prefill group then the decode group, whose candidates are only the engines that can
// receive the chosen prefill engine's KV cache (plan.PDMismatch). A failed decode pick
// discards the tentative prefill pick; nothing has been dispatched, so there is nothing
// to undo. Errors keep the failing stage and are prefixed with the bucket id.
func (b *Bucket) PickEngines(ctx context.Context, facts *policy.Facts, pass *policy.Pass) (Selection, error) {
	sel := Selection{Bucket: b}
	var err error
	if b.plain != nil {
		sel.Plain, err = b.plain.Pick(ctx, facts, pass)
	} else if sel.Prefill, err = b.prefill.Pick(ctx, facts, pass); err == nil {
		sel.Decode, err = b.decode.pick(ctx, facts, pass, sel.Prefill.Engine)
	}
	if err != nil {
		return Selection{}, fmt.Errorf("bucket %s: %w", b.id, err)
	}
	return sel, nil
}

// Route is the handler's selection pass (docs/design.md, Buckets): it tries the compatible
// buckets in order until one supplies a complete selection. NoCandidates,
// NoAdmissibleEngine and AdmissionRejected advance to the next bucket, where every required
// engine is picked again; any other failure stops the pass. Failures are returned as
// *Error, which maps them to an HTTP status and code. The pass's trace, if any, receives
// the whole pass; a nil pass records nothing and is no dry run.
//
// When the model has a cache-aware group, the pass memoizes prefix lookups, so that every
// bucket and stage it tries queries each prefix source at most once.
func (r *Resolver) Route(ctx context.Context, facts *policy.Facts, pass *policy.Pass) (Selection, error) {
	pass = pass.Start(r.prefix)
	rec := pass.Rec()
	if err := validate(facts.InputTokens, facts.ExpectedPeak, facts.PeakKnown); err != nil {
		return Selection{}, classify(err)
	}
	need := contextNeed(facts.InputTokens, facts.ExpectedPeak, facts.PeakKnown)
	order := r.buckets
	if r.sloActive(facts.SLO) {
		var buf [maxStackBuckets]*Bucket
		order = r.sloOrder(facts, need, rec, buf[:0])
	}
	if rec.Detailed() {
		r.record(rec, order, facts, need)
	}
	var (
		tried     bool
		rejected  []string
		lastStage plan.Role
	)
	for _, b := range order {
		if b.fit(facts.InputTokens, need) != fits {
			continue
		}
		tried = true
		rec.BeginAttempt(b.id)
		sel, err := b.PickEngines(ctx, facts, pass)
		rec.EndAttempt(err)
		if err == nil {
			sel.SLOTTFT, sel.SLOTPS = outcome(r.prefs, facts.SLO, b)
			return sel, nil
		}
		var (
			none    *policy.NoCandidates
			noAdmit *policy.NoAdmissibleEngine
			reject  *policy.AdmissionRejected
		)
		switch {
		case errors.As(err, &noAdmit), errors.As(err, &reject):
			rejected = append(rejected, err.Error())
		case errors.As(err, &none):
			lastStage = none.Stage
		default:
			return Selection{}, classify(err)
		}
	}
	switch {
	case !tried:
		return Selection{}, &Error{Reason: NoMatchingBucket,
			msg: noMatchMessage(r.model, facts)}
	case len(rejected) > 0:
		return Selection{}, &Error{Reason: AdmissionRejected,
			msg: "every compatible bucket rejected the request: " + strings.Join(rejected, "; "), Reasons: rejected}
	default:
		return Selection{}, &Error{Reason: NoCandidates,
			msg: fmt.Sprintf("no eligible %s engine in any compatible bucket", lastStage), Stage: lastStage}
	}
}

// record writes the compatible buckets in try order and why the others were excluded.
func (r *Resolver) record(rec *decision.Trace, order []*Bucket, facts *policy.Facts, need int64) {
	for _, b := range order {
		if b.fit(facts.InputTokens, need) == fits {
			rec.Compatible(b.id)
		}
	}
	res, _ := r.Resolve(facts.InputTokens, facts.ExpectedPeak, facts.PeakKnown) // validated by the caller
	for _, x := range res.Excluded {
		rec.Exclude(x.Bucket.id, x.Reason)
	}
}

func noMatchMessage(model string, facts *policy.Facts) string {
	if facts.PeakKnown {
		return fmt.Sprintf("no bucket of model %s accepts %d input tokens with an expected peak of %d tokens",
			model, facts.InputTokens, facts.ExpectedPeak)
	}
	return fmt.Sprintf("no bucket of model %s accepts %d input tokens", model, facts.InputTokens)
}

// Reason is why a selection pass failed, typed so that the HTTP edge can answer it;
// its value is the machine-readable code clients get (see Error.Code).
type Reason string

// The reasons a selection fails. The first three are the request's to fix, the next two
// the fleet's (no engine can take the request now), the rest the router's: the request
// reached selection in a state the router should have prevented, and routing stops.
const (
	NoMatchingBucket     Reason = "no_matching_bucket"
	TokenCountOverflow   Reason = "token_count_overflow"
	InvalidTokenCount    Reason = "invalid_token_count"
	AdmissionRejected    Reason = "admission_rejected"
	NoCandidates         Reason = "no_candidates" // answered as no_<stage>_engine
	InvalidSignal        Reason = "invalid_signal"
	InvalidConfiguration Reason = "invalid_configuration"
	OutsideCandidates    Reason = "outside_candidates"
	Internal             Reason = "internal_error"
)

// Error is a selection failure and its reason.
type Error struct {
	Reason Reason
	msg    string
	// Stage is the unavailable stage of a NoCandidates failure.
	Stage plan.Role
	// Reasons are the accumulated admission rejections of an AdmissionRejected failure,
	// one per failed bucket attempt.
	Reasons []string
	err     error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the policy error that stopped the pass, if any.
func (e *Error) Unwrap() error { return e.err }

// Code returns the machine-readable error code: the reason, or no_<stage>_engine for a
// stage without candidates.
func (e *Error) Code() string {
	if e.Reason == NoCandidates {
		return "no_" + string(e.Stage) + "_engine"
	}
	return string(e.Reason)
}

// classify maps an error that stops the pass: an invalid signal, an invalid configuration,
// a foreign pick, or an unexpected policy failure. All are the router's: the request
// reached selection in a state the router should have prevented.
func classify(err error) *Error {
	var (
		sig     *policy.InvalidSignal
		conf    *policy.InvalidConfiguration
		outside *policy.OutsideCandidates
	)
	reason := Internal
	switch {
	case errors.As(err, &sig):
		reason = InvalidSignal
	case errors.As(err, &conf):
		reason = InvalidConfiguration
	case errors.As(err, &outside):
		reason = OutsideCandidates
	}
	return &Error{Reason: reason, msg: err.Error(), err: err}
}

// ExpectedPeak returns input plus the requested output budget, the length a bucket's
// context capacity must hold. A negative count or a sum that overflows is the request's
// error, checked here so no caller computes the sum unchecked.
func ExpectedPeak(inputTokens, maxTokens int64) (int64, error) {
	if inputTokens < 0 || maxTokens < 0 {
		return 0, &Error{Reason: InvalidTokenCount,
			msg: fmt.Sprintf("token counts must not be negative: input %d, max tokens %d", inputTokens, maxTokens)}
	}
	if inputTokens > math.MaxInt64-maxTokens {
		return 0, &Error{Reason: TokenCountOverflow,
			msg: fmt.Sprintf("input %d tokens plus max tokens %d overflows a token count", inputTokens, maxTokens)}
	}
	return inputTokens + maxTokens, nil
}
