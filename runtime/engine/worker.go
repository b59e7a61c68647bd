// Package engine holds the router's view of the engines it dispatches to: each Worker's
// identity, role and live health, and the Registry of workers currently serving.
//
// Workers are shared by pointer and their identity is the pointer, not the id: when an
// engine is re-registered it gets a new *Worker, and selection rejects a stale pointer that
// happens to carry the same id (docs/design.md, Groups).
package engine

import (
	"net/url"
	"sync/atomic"

	"github.com/routerkit/router/runtime/plan"
)

// Worker is one engine endpoint. Its identity fields never change after construction;
// health and the router-local in-flight count are atomics so that selection can read them
// without locks while health checks and dispatch update them.
//
// A Worker must not be copied after first use.
type Worker struct {
	id            string
	url           string
	model         string
	role          plan.Role
	dpSize        int
	bootstrapPort int
	// target is url parsed once, where dispatch sends requests; nil when url does not
	// parse (the compiler and membership changes refuse such an engine).
	target *url.URL
	// kvTransfer is set for a prefill engine that speaks vLLM's kv_transfer_params PD
	// protocol rather than SGLang's bootstrap protocol.
	kvTransfer bool
	// pdCompat is what the engine declares about its KV transfer; nil declares nothing.
	pdCompat *plan.PDCompat
	// index is the engine's position in the plan's engine list, or -1: shared state kept
	// per engine (the load table) indexes a slice with it instead of hashing the id.
	index int

	// flags holds flagUnhealthy and flagDraining, so that Available reads both with one
	// load; zero is a healthy engine taking new requests.
	flags    atomic.Uint32
	inflight atomic.Int64
	breaker  *Breaker // nil: no passive health
}

// New returns a healthy worker for the configured engine. A DP size below one is treated
// as one rank.
func New(e plan.Engine) *Worker {
	dp := e.DPSize
	if dp < 1 {
		dp = 1
	}
	target, err := url.Parse(e.URL)
	if err != nil {
		target = nil
	}
	return &Worker{
		target:        target,
		kvTransfer:    e.Role == plan.RolePrefill && e.PDProtocol == plan.PDKVTransferParams,
		id:            e.ID,
		url:           e.URL,
		model:         e.Model,
		role:          e.Role,
		dpSize:        dp,
		bootstrapPort: e.BootstrapPort,
		pdCompat:      e.PDCompat,
		index:         -1,
	}
}

// PDCompat returns what the engine declares about its KV transfer, nil when nothing:
// a decode engine is paired only with a prefill engine plan.PDMismatch finds no fault with.
func (w *Worker) PDCompat() *plan.PDCompat { return w.pdCompat }

const (
	flagUnhealthy uint32 = 1 << iota
	flagDraining
)

// Index returns the engine's slot number in the load table (its position in the plan's
// engine list for a worker built by FromPlan), or -1 when it has none.
func (w *Worker) Index() int { return w.index }

// SetIndex records the engine's slot number in the load table (load.Table.Add); call it
// before the worker is shared.
func (w *Worker) SetIndex(i int) { w.index = i }

// ID returns the engine's configured id.
func (w *Worker) ID() string { return w.id }

// URL returns the engine's base URL.
func (w *Worker) URL() string { return w.url }

// Target returns the engine's parsed base URL, nil when its URL does not parse. The URL
// is shared and must not be modified.
func (w *Worker) Target() *url.URL { return w.target }

// KVTransfer reports whether the engine is a prefill engine speaking vLLM's
// kv_transfer_params PD protocol.
func (w *Worker) KVTransfer() bool { return w.kvTransfer }

// Model returns the model the engine serves.
func (w *Worker) Model() string { return w.model }

// Role returns the stage the engine serves; the registry's role is authoritative.
func (w *Worker) Role() plan.Role { return w.role }

// DPSize returns the number of data-parallel ranks, at least one.
func (w *Worker) DPSize() int { return w.dpSize }

// BootstrapPort returns the prefill engine's KV bootstrap port, or 0.
func (w *Worker) BootstrapPort() int { return w.bootstrapPort }

// Healthy reports whether the engine may receive new requests.
func (w *Worker) Healthy() bool { return w.flags.Load()&flagUnhealthy == 0 }

// Draining reports whether the engine is being taken out of service: selection no longer
// picks it, and the requests it already has finish.
func (w *Worker) Draining() bool { return w.flags.Load()&flagDraining != 0 }

// Drain stops new picks of the engine. It cannot be undone: an engine back in service is
// added again as a new worker.
func (w *Worker) Drain() { w.flags.Or(flagDraining) }

// Available reports whether selection may pick the engine: healthy, not draining, and its
// circuit breaker (if any) closed or ready for a probe. An open breaker takes the engine
// out of candidate sets exactly as failed health checks do.
func (w *Worker) Available() bool {
	return w.flags.Load() == 0 && (w.breaker == nil || w.breaker.Allow())
}

// Breaker returns the engine's circuit breaker, or nil.
func (w *Worker) Breaker() *Breaker { return w.breaker }

// SetBreaker attaches a circuit breaker; call it before the worker is shared.
func (w *Worker) SetBreaker(b *Breaker) { w.breaker = b }

// SetHealthy records the outcome of a health check.
func (w *Worker) SetHealthy(ok bool) {
	if ok {
		w.flags.And(^flagUnhealthy)
	} else {
		w.flags.Or(flagUnhealthy)
	}
}

// Inflight returns the number of requests the router has dispatched to this engine and not
// yet seen finish. Unlike engine-reported load it is always known.
func (w *Worker) Inflight() int64 { return w.inflight.Load() }

// AddInflight adjusts the in-flight count and returns the new value. Dispatch code should
// use load.Table.Acquire, whose guard pairs every increment with exactly one decrement;
// AddInflight exists for that accounting and for fixtures that set a starting count.
func (w *Worker) AddInflight(delta int64) int64 { return w.inflight.Add(delta) }
