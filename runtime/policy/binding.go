package policy

import (
	"cmp"
	"context"
	"slices"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/load"
)

// binder is the selection SessionAware and Sticky share (docs/design.md, Policies and
// Affinity state): reuse the admitted binding of the request's key, otherwise ask a nested
// fallback and bind the engine it returns once this policy has admitted it.
//
//   - A missing or empty key goes to the fallback and creates no binding.
//   - A live binding to a candidate is reused regardless of pressure, if it passes this
//     policy's admission. A rejection is returned as is: the binding stays and no other
//     engine is tried, so the bucket loop moves on.
//   - A missing binding, or one to an engine that is no longer a candidate, goes to the
//     fallback, which runs with default (no) limits; this policy checks the engine it
//     returns and binds it only when admitted.
//   - When a concurrent pick bound the key first, its engine wins if it is a candidate,
//     after this policy checks it; a winner outside the candidates is replaced. Conflicts
//     are retried a bounded number of times.
//   - A dry run (see Pass.DryRun) selects the same way but writes and refreshes nothing.
type binder struct {
	store    affinity.Bindings
	load     *load.Table
	limits   Limits
	fallback Policy
	key      func(*Request) string
	reasons  bindReasons
}

// bindReasons are a binder's pick reasons, fixed per policy so that picks do not build
// strings and metrics can count them.
type bindReasons struct {
	noKey, reused, bound, rebound, concurrent, unbound, dryRun string
}

// maxBindAttempts bounds the compare-and-bind loop. Each retry follows a concurrent write
// of the same key, so more than a couple of rounds means a pathological race, and the pick
// then goes ahead without recording its binding.
const maxBindAttempts = 3

// Pick implements Policy.
func (b *binder) Pick(ctx context.Context, engines []*engine.Worker, req *Request) (Pick, error) {
	if len(engines) == 0 {
		return noCandidates(req)
	}
	rec := req.Pass.Rec()
	value := b.key(req)
	if value == "" {
		w, err := b.fallbackPick(ctx, rec, engines, req)
		if err != nil {
			return Pick{}, err
		}
		return Pick{Engine: w, Reason: b.reasons.noKey}, nil
	}

	k := affinity.Key{Model: req.Model, Bucket: req.BucketID, Stage: req.Stage, Value: value}
	old, ok := b.store.Get(k)
	if ok {
		if w := candidate(engines, old); w != nil {
			if rej := b.check(rec, w, req); rej != nil {
				return Pick{}, rej
			}
			if !req.Pass.Dry() {
				b.store.Touch(k, old)
			}
			return Pick{Engine: w, Reason: b.reasons.reused}, nil
		}
		if rec.Detailed() {
			rec.Note("bound engine " + old + " is not a candidate; choosing a new one")
		}
	}

	w, err := b.fallbackPick(ctx, rec, engines, req)
	if err != nil {
		return Pick{}, err
	}
	if req.Pass.Dry() {
		return Pick{Engine: w, Reason: b.reasons.dryRun}, nil
	}
	for range maxBindAttempts {
		cur, bound := b.store.CompareAndBind(k, old, w.ID())
		if bound {
			if old != "" {
				return Pick{Engine: w, Reason: b.reasons.rebound}, nil
			}
			return Pick{Engine: w, Reason: b.reasons.bound}, nil
		}
		if cw := candidate(engines, cur); cw != nil {
			if rec.Detailed() {
				rec.Note("a concurrent pick bound " + cur + " first")
			}
			if cw == w {
				return Pick{Engine: w, Reason: b.reasons.concurrent}, nil // admitted above
			}
			if rej := b.check(rec, cw, req); rej != nil {
				return Pick{}, rej
			}
			return Pick{Engine: cw, Reason: b.reasons.concurrent}, nil
		}
		old = cur // expired meanwhile (""), or bound outside the candidates: replace it
	}
	return Pick{Engine: w, Reason: b.reasons.unbound}, nil
}

// fallbackPick asks the nested fallback and checks its engine with this policy's limits.
// The fallback reads its own load; admission here reads the engine's current record.
//
// The fallback runs without the trace and its choice is recorded as a note: its own
// admission, with no limits, would otherwise appear beside this policy's verdict on the
// same engine as a second, contradicting one.
func (b *binder) fallbackPick(ctx context.Context, rec *decision.Trace, engines []*engine.Worker, req *Request) (*engine.Worker, error) {
	if rec != nil { // the pass is this request's alone: mute it for the fallback
		req.Pass.Trace = nil
		defer func() { req.Pass.Trace = rec }()
	}
	p, err := b.fallback.Pick(ctx, engines, req)
	if err != nil {
		return nil, err
	}
	if candidate(engines, p.Engine.ID()) != p.Engine {
		return nil, &OutsideCandidates{Stage: req.Stage, Engine: p.Engine}
	}
	if rec.Detailed() {
		rec.Note("fallback chose " + p.Engine.ID() + ": " + p.Reason)
	}
	if rej := b.check(rec, p.Engine, req); rej != nil {
		return nil, rej
	}
	return p.Engine, nil
}

func (b *binder) check(rec *decision.Trace, w *engine.Worker, req *Request) *AdmissionRejected {
	o := observe(rec, b.load, w, b.load.Now())
	return b.limits.admit(rec, w, req.Stage, o.r)
}

// candidate returns the candidate with the id, or nil. Candidates are sorted by id.
func candidate(engines []*engine.Worker, id string) *engine.Worker {
	i, ok := slices.BinarySearchFunc(engines, id, func(w *engine.Worker, id string) int { return cmp.Compare(w.ID(), id) })
	if !ok {
		return nil
	}
	return engines[i]
}
