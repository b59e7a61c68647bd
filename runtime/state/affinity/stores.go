package affinity

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// Stores are a router's binding stores: for every model, one for session keys and one for
// routing keys, each with the model's idle timeout and eviction interval. The two
// namespaces are separate because a session id and a routing key are different header
// values that may collide.
//
// With a shared store in the plan (bindings.store "redis"), the policies get Shared
// namespaces on one Remote; the in-process stores then hold each replica's local copy,
// which it routes with while the shared store is down.
type Stores struct {
	clock  func() time.Time
	remote *Remote                // nil for in-process bindings only
	models map[string]modelStores // fixed at construction, so lookups need no lock
}

type modelStores struct {
	session, sticky           Bindings
	sessionLocal, stickyLocal *Store
	sessionEvery, stickyEvery time.Duration
}

// FromPlan returns empty stores for every model of the plan, shared through the plan's
// binding store if it names one. clock is the time source for expiry and sweeping; nil
// means time.Now.
func FromPlan(p *plan.Plan, clock func() time.Time) *Stores {
	if clock == nil {
		clock = time.Now
	}
	s := &Stores{clock: clock, models: make(map[string]modelStores, len(p.Models))}
	if b := p.Bindings; b != nil && b.Store == plan.BindingsRedis {
		s.remote = NewRemote(*b, clock)
	}
	for _, m := range p.Models {
		ms := modelStores{
			sessionLocal: NewStore(secs(m.SessionIdleSecs), clock),
			stickyLocal:  NewStore(secs(m.StickyIdleSecs), clock),
			sessionEvery: secs(m.SessionEvictionIntervalSecs),
			stickyEvery:  secs(m.StickyEvictionIntervalSecs),
		}
		// The cap bounds the local copies too: a shared store bounds its keys by expiry
		// and its own maxmemory, but what a replica keeps is its memory.
		ms.sessionLocal.SetMaxKeys(p.State.AffinityMaxKeys)
		ms.stickyLocal.SetMaxKeys(p.State.AffinityMaxKeys)
		ms.session, ms.sticky = ms.sessionLocal, ms.stickyLocal
		if s.remote != nil {
			ms.session = NewShared(s.remote, ms.sessionLocal, "session")
			ms.sticky = NewShared(s.remote, ms.stickyLocal, "sticky")
		}
		s.models[m.Name] = ms
	}
	return s
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

// Session returns the model's session bindings, or nil for a model not in the plan.
func (s *Stores) Session(model string) Bindings {
	if m, ok := s.models[model]; ok {
		return m.session
	}
	return nil
}

// Sticky returns the model's routing-key bindings, or nil for a model not in the plan.
func (s *Stores) Sticky(model string) Bindings {
	if m, ok := s.models[model]; ok {
		return m.sticky
	}
	return nil
}

// Remote returns the shared store's connection, or nil when bindings are in-process only.
func (s *Stores) Remote() *Remote { return s.remote }

// SetLogger logs the shared store's changes between up and down; with in-process
// bindings there is nothing to log.
func (s *Stores) SetLogger(log *slog.Logger) {
	if s.remote != nil {
		s.remote.SetLogger(log)
	}
}

// Status reports the binding store for GET /admin/state.
func (s *Stores) Status() Status {
	if s.remote == nil {
		return Status{Store: plan.BindingsMemory, Up: true}
	}
	return s.remote.Status()
}

// RemoveEngine drops every binding to the engine in every in-process store. A shared
// store keeps its bindings to the engine: other replicas may still route to it, and a
// policy replaces a binding to an engine outside its candidates on the key's next pick.
func (s *Stores) RemoveEngine(engineID string) {
	for _, m := range s.models {
		m.sessionLocal.RemoveEngine(engineID)
		m.stickyLocal.RemoveEngine(engineID)
	}
}

// defaultEvery is the sweep interval of a store whose plan gives none, the configuration
// default of both eviction intervals.
const defaultEvery = 60 * time.Second

// Run sweeps every in-process store at its model's eviction interval until ctx is done,
// and watches the shared store if there is one (see Remote.Run). Serving starts it once,
// beside the stores; without it expired bindings are still ignored but their memory is
// never freed, and a shared store once down stays down.
func (s *Stores) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.remote != nil {
		wg.Go(func() { s.remote.Run(ctx) })
	}
	sweep := func(st *Store, every time.Duration) {
		if every <= 0 {
			every = defaultEvery
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				st.Sweep(s.clock())
			}
		}
	}
	for _, m := range s.models {
		wg.Go(func() { sweep(m.sessionLocal, m.sessionEvery) })
		wg.Go(func() { sweep(m.stickyLocal, m.stickyEvery) })
	}
	wg.Wait()
}
