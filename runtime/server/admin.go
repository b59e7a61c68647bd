package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/discovery"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/queue"
	"github.com/routerkit/router/runtime/state/affinity"
)

// A generation is the control.StateSource of its own GET /admin/state: the snapshot shows
// its plan, models and queue beside the router's engines, counters and decisions.
var _ control.StateSource = (*generation)(nil)

// Started is when the router started.
func (s *Server) Started() time.Time { return s.started }

// Draining is whether the router is shutting down.
func (s *Server) Draining() bool { return s.draining.Load() }

// Plan is this generation's plan and its number.
func (s *generation) Plan() (*plan.Plan, uint64) { return s.plan, s.number }

// Registry gathers the router's metrics.
func (s *Server) Registry() prometheus.Gatherer { return s.metrics.reg }

// Decisions are the recent routing decisions, newest first, with their engines and
// reasons.
func (s *Server) Decisions() []control.Decision { return s.recent.list() }

// Bindings reports the binding store of this generation's policies.
func (s *generation) Bindings() affinity.Status { return s.deps.Affinity.Status() }

// DNS reports each DNS discovery source, nil without any.
func (s *Server) DNS() []discovery.Status { return s.dnsStatus() }

// Queue is the router's request queue.
func (s *Server) Queue() *queue.Queue { return s.active.queue }

// EngineStatuses lists the member engines in fleet order with their breakers, monitor
// errors and prefix index sizes.
func (s *generation) EngineStatuses() []control.EngineStatus {
	status := s.monitor.Status()
	list := s.memberList()
	out := make([]control.EngineStatus, len(list))
	for i, m := range list {
		out[i] = control.EngineStatus{Breaker: breakerState(m.worker), HealthError: status[m.engine.ID].HealthError,
			LoadError: status[m.engine.ID].LoadError, PrefixIndex: s.prefixSizes(m.engine)}
		out[i].Member, out[i].LoadAt = s.asMember(m)
	}
	return out
}
