package affinity

import (
	"context"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// Stores are a router's binding stores: for every model, one for session keys and one for
// routing keys, each with the model's idle timeout and eviction interval. The two
// namespaces are separate because a session id and a routing key are different header
// values that may collide.
type Stores struct {
	clock  func() time.Time
	models map[string]modelStores // fixed at construction, so lookups need no lock
}

type modelStores struct {
	session, sticky           *Store
	sessionEvery, stickyEvery time.Duration
}

// FromPlan returns empty stores for every model of the plan. clock is the time source for
// expiry and sweeping; nil means time.Now.
func FromPlan(p *plan.Plan, clock func() time.Time) *Stores {
	if clock == nil {
		clock = time.Now
	}
	s := &Stores{clock: clock, models: make(map[string]modelStores, len(p.Models))}
	for _, m := range p.Models {
		session, sticky := NewStore(secs(m.SessionIdleSecs), clock), NewStore(secs(m.StickyIdleSecs), clock)
		session.SetMaxKeys(p.State.AffinityMaxKeys)
		sticky.SetMaxKeys(p.State.AffinityMaxKeys)
		s.models[m.Name] = modelStores{
			session:      session,
			sticky:       sticky,
			sessionEvery: secs(m.SessionEvictionIntervalSecs),
			stickyEvery:  secs(m.StickyEvictionIntervalSecs),
		}
	}
	return s
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

// Session returns the model's session store, or nil for a model not in the plan.
func (s *Stores) Session(model string) *Store { return s.models[model].session }

// Sticky returns the model's routing-key store, or nil for a model not in the plan.
func (s *Stores) Sticky(model string) *Store { return s.models[model].sticky }

// RemoveEngine drops every binding to the engine in every store.
func (s *Stores) RemoveEngine(engineID string) {
	for _, m := range s.models {
		m.session.RemoveEngine(engineID)
		m.sticky.RemoveEngine(engineID)
	}
}

// defaultEvery is the sweep interval of a store whose plan gives none, the configuration
// default of both eviction intervals.
const defaultEvery = 60 * time.Second

// Run sweeps every store at its model's eviction interval until ctx is done. Serving
// starts it once, beside the stores; without it expired bindings are still ignored but
// their memory is never freed.
func (s *Stores) Run(ctx context.Context) {
	var wg sync.WaitGroup
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
		wg.Go(func() { sweep(m.session, m.sessionEvery) })
		wg.Go(func() { sweep(m.sticky, m.stickyEvery) })
	}
	wg.Wait()
}
