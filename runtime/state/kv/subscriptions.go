package kv

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/routerkit/router/runtime/plan"
)

// Subscriptions runs the KV-event subscribers of a set of engines that changes while the
// router serves (reloads, engines added and removed at run time). The unit that starts
// and stops is an engine in connect mode, or every engine bound to one endpoint in bind
// mode, since they share one listener. A change to one bound engine changes the running
// listener's topics in place: the engines beside it keep their connections and what the
// index knows of them. Only a change of the port or of the number of ranks restarts the
// listener, which clears its engines' ranks.
type Subscriptions struct {
	ctx context.Context
	ix  *Index
	log *slog.Logger

	mu    sync.Mutex
	units map[string]*unit
}

type unit struct {
	engines []plan.Engine
	stop    context.CancelFunc
	sub     *Subscription
}

// NewSubscriptions returns a manager whose subscribers feed ix and run until ctx is done
// or Set stops them.
func NewSubscriptions(ctx context.Context, ix *Index, log *slog.Logger) *Subscriptions {
	return &Subscriptions{ctx: ctx, ix: ix, log: log, units: map[string]*unit{}}
}

// Set makes the engines with kv_events the ones subscribed: a unit whose engines are
// unchanged keeps running, a changed or gone one is stopped (Set returns once its
// subscribers have), and a new one starts. Add each engine to the index first. Errors
// are per unit (a malformed endpoint): the other units still run.
func (s *Subscriptions) Set(engines []plan.Engine) []error {
	want := map[string][]plan.Engine{}
	for _, e := range engines {
		if e.KVEvents == nil {
			continue
		}
		key := "connect " + e.ID
		if e.KVEvents.Mode == plan.KVBind {
			// One listener per port, whatever host each engine wrote (the compiler
			// requires the same endpoint for every engine of a port).
			key = "bind " + e.KVEvents.Endpoint
			if _, port, err := splitEndpoint(e.KVEvents.Endpoint, 0); err == nil {
				key = "bind " + strconv.Itoa(port)
			}
		}
		want[key] = append(want[key], e)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, u := range s.units {
		es := want[key]
		if reflect.DeepEqual(u.engines, es) {
			continue
		}
		if len(es) > 0 && strings.HasPrefix(key, "bind ") {
			// An error here is reported by the Subscribe below.
			if ok, _ := u.sub.rebind(&plan.Plan{Engines: es}, s.ix, s.log, unchanged(u.engines, es)); ok {
				u.engines = es
				continue
			}
		}
		u.stop()
		u.sub.Wait()
		delete(s.units, key)
	}
	var errs []error
	for key, es := range want {
		if s.units[key] != nil {
			continue
		}
		ctx, stop := context.WithCancel(s.ctx)
		sub, err := Subscribe(ctx, &plan.Plan{Engines: es}, s.ix, s.log)
		if err != nil {
			stop()
			errs = append(errs, err)
			continue
		}
		s.units[key] = &unit{engines: es, stop: stop, sub: sub}
	}
	return errs
}

// unchanged reports whether an engine's configuration is the same in before and after.
func unchanged(before, after []plan.Engine) func(engine string) bool {
	was := map[string]plan.Engine{}
	for _, e := range before {
		was[e.ID] = e
	}
	same := map[string]bool{}
	for _, e := range after {
		if old, ok := was[e.ID]; ok && reflect.DeepEqual(old, e) {
			same[e.ID] = true
		}
	}
	return func(id string) bool { return same[id] }
}

// Wait blocks until every subscriber has stopped, after the context is done.
func (s *Subscriptions) Wait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.units {
		u.sub.Wait()
	}
}

// Engines lists the ids of the engines subscribed to, sorted, for the admin state and
// tests.
func (s *Subscriptions) Engines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, u := range s.units {
		for _, e := range u.engines {
			ids = append(ids, e.ID)
		}
	}
	slices.Sort(ids)
	return ids
}
