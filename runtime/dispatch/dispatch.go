// Package dispatch sends a request, once selection has chosen its engines, to the plain
// engine or the prefill/decode pair, and makes sure the client gets an answer it can act
// on: the engine's, or a typed *Error the HTTP edge answers. It owns what happens between
// the router and the engines: the proxying of bodies both ways, the PD protocols
// (SGLang's bootstrap fields, vLLM's kv_transfer_params), the dispatch deadlines, the
// circuit breakers' verdicts, the retries of attempts no engine received, the header
// policy and the classification of failures.
package dispatch

import (
	"log/slog"
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/state/load"
)

// Writer is the client's response as dispatch writes it: the HTTP edge's response
// writer, which remembers what went out.
type Writer interface {
	http.ResponseWriter
	// ID is the request's id, which names it in logs and in every error answer.
	ID() string
	// Status is the final status written to the client, 0 before any.
	Status() int
	// Served reports whether the client got the engine's whole answer: a 200 whose
	// stream did not fail.
	Served() bool
	// StreamFailed records err, which ended a stream after its 200, and returns the
	// event that tells the client, written after what the stream delivered.
	StreamFailed(err *Error) (event []byte)
}

// Dispatcher dispatches the requests of one plan generation.
type Dispatcher struct {
	client      *http.Client
	table       *load.Table
	deps        policy.Deps
	log         *slog.Logger
	timeouts    Timeouts
	headers     HeaderPolicy
	maxAttempts int
	// Outbound, when set, sees every request to an engine last, before it is sent, and
	// returns the request to send: the HTTP edge starts the engine request's span there
	// and sets its traceparent (runtime/tracing). Nil sends requests as built.
	Outbound func(req *http.Request, w *engine.Worker) *http.Request
}

// New builds the dispatcher of plan p: engines are spoken to through client, their
// in-flight counts kept in table and the prefix indexes in deps taught what they served.
func New(p *plan.Plan, client *http.Client, table *load.Table, deps policy.Deps, log *slog.Logger) *Dispatcher {
	return &Dispatcher{client: client, table: table, deps: deps, log: log,
		timeouts: TimeoutsOf(p.Timeouts), headers: NewHeaderPolicy(p.Headers), maxAttempts: max(p.Retries.MaxAttempts, 1)}
}

// Do sends a selected request to its engines. An attempt the engines never received
// (connection refused, breaker open) is retried on reselect's selection, which must
// leave out the engines in p.Facts.Avoid, up to retries.max_attempts; every other failure
// is returned (see Error.Retriable for why). It returns nil when the engine's answer
// reached the client; otherwise the failure, which the caller answers unless the
// response already started. A dispatch failure does not otherwise restart selection.
func (dp *Dispatcher) Do(w Writer, r *http.Request, p *request.Prepared, sel bucket.Selection, reselect func() (bucket.Selection, error)) *Error {
	for attempt := 1; ; attempt++ {
		err := dp.once(w, r, p, sel)
		if err == nil {
			if w.Status() == 0 { // a proxy that wrote nothing must not become an empty 200
				return &Error{Kind: Malformed, Stage: plan.RolePlain, Detail: "no response written"}
			}
			return nil
		}
		if !err.Retriable() || attempt >= dp.maxAttempts || w.Status() != 0 {
			return err
		}
		p.Facts.Avoid = append(p.Facts.Avoid, err.Worker)
		next, rerr := reselect()
		if rerr != nil { // nowhere else to go: the dispatch failure is the answer
			return err
		}
		sel = next
	}
}

// once acquires the selected engines' breakers and dispatches.
func (dp *Dispatcher) once(w Writer, r *http.Request, p *request.Prepared, sel bucket.Selection) *Error {
	defer dp.learnPrefix(p, sel, w)()
	if !sel.Bucket.PD() {
		e := sel.Plain.Engine
		if !acquire(e) {
			return &Error{Kind: BreakerOpen, Stage: plan.RolePlain, Worker: e}
		}
		return dp.forward(r.Context(), w, r, payload{head: p.Body}, e, plan.RolePlain, nil)
	}
	pre, dec := sel.Prefill.Engine, sel.Decode.Engine
	if !acquire(pre) {
		return &Error{Kind: BreakerOpen, Stage: plan.RolePrefill, Worker: pre}
	}
	if !acquire(dec) {
		if b := pre.Breaker(); b != nil {
			b.Abandon()
		}
		return &Error{Kind: BreakerOpen, Stage: plan.RoleDecode, Worker: dec}
	}
	if pre.KVTransfer() {
		return dp.dispatchKVTransfer(w, r, p, sel)
	}
	return dp.dispatchPD(w, r, p, sel)
}

func acquire(w *engine.Worker) bool {
	b := w.Breaker()
	return b == nil || b.Acquire()
}

// learnPrefix feeds the router's prefix indexes with a dispatch, in two steps: it records
// speculative entries for the local index at once, as the dispatch starts, and returns
// the step to run when the dispatch has ended, which teaches the approximate indexes
// what the request left in its engine's KV cache. Each dispatch attempt defers the
// returned step, so a request retried on another selection is learned for the engines
// that served it, never for those that did not receive it:
//
//	defer dp.learnPrefix(p, sel, w)()
//
// The engine is the plain one, or the prefill one for a PD request, since prefill is
// where the prompt's pages are computed and reused. The approximate indexes learn only
// from a request the engine served in full (a 200 whose stream did not fail), so an
// engine that refuses or drops work does not attract more of the same prompts; a burst
// of identical prompts sent before the first one finishes is placed by the load fallback
// (docs/config.md, "Prefix sources"). Speculative entries are guesses that expire unless
// the engine's KV events confirm them, so they are recorded before the outcome is known.
// So are the claims of shared approximate indexes (prefix_source.share "store"): the
// prompt's next turn may reach another replica as soon as this answer ends and must find
// the claim there; a failed dispatch withdraws them.
func (dp *Dispatcher) learnPrefix(p *request.Prepared, sel bucket.Selection, w Writer) func() {
	pick := sel.Plain
	if sel.Bucket.PD() {
		pick = sel.Prefill
	}
	if pick.Engine == nil || !dp.deps.Learns() {
		return func() {}
	}
	id, hashes := pick.Engine.ID(), policy.NewBlockHashes(p.Facts.TokenIDs) // hashed once for both steps
	dp.deps.RecordSpeculative(id, hashes)
	dp.deps.ClaimDispatch(id, hashes)
	return func() {
		if w.Served() {
			dp.deps.RecordDispatch(id, hashes)
		} else {
			dp.deps.UnclaimDispatch(id, hashes)
		}
	}
}
