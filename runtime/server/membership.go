package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/kv"
)

// member is one engine of the fleet, serving or on its way out.
type member struct {
	engine plan.Engine
	worker *engine.Worker
	origin string
	// leaving is set once the engine is out of the registry: it is listed until the
	// requests it serves finish, then forgotten.
	leaving bool
	// collectors are the engine's metric gauges, unregistered when it is forgotten.
	collectors []prometheus.Collector
}

// state names what the engine is doing for /admin/state: serving, draining (no new
// picks, still a member) or leaving (removed, finishing its requests).
func (m *member) state() string {
	switch {
	case m.leaving:
		return "leaving"
	case m.worker.Draining():
		return "draining"
	default:
		return "serving"
	}
}

// fleet is the membership of a router: every engine with its origin, in order (the
// configuration's, then as added), and what runs for them while the router serves.
type fleet struct {
	mu      sync.Mutex // serialises reloads and membership changes
	members map[string]*member
	order   []string
	// maxMembers bounds the fleet (the const, lowered by tests).
	maxMembers int
	// list is a copy of the members in fleet order, republished after every change, so
	// /admin/state and /metrics never wait for a reload that is loading tokenizers.
	list atomic.Pointer[[]member]

	// Set by Serve: the context of the background tasks, the KV-event subscriptions and
	// the affinity sweeper (restarted when a reload replaces the stores).
	bgCtx         context.Context
	bg            sync.WaitGroup
	subs          *kv.Subscriptions
	stopAffinity  context.CancelFunc
	affinityStore *affinity.Stores

	// metrics counts reloads and membership changes and reports the members.
	metrics *control.Metrics
}

func (f *fleet) init(members func() []control.Member) {
	f.members, f.maxMembers = map[string]*member{}, maxMembers
	f.metrics = control.NewMetrics(members)
}

// engines lists the members still in service (serving or draining), in fleet order.
func (f *fleet) engines() []plan.Engine {
	out := make([]plan.Engine, 0, len(f.order))
	for _, id := range f.order {
		if m := f.members[id]; m != nil && !m.leaving {
			out = append(out, m.engine)
		}
	}
	return out
}

// bindingsCollector reports the current generation's binding stores, which a reload may
// replace.
type bindingsCollector struct{ c *Server }

func newBindingsCollector(c *Server) prometheus.Collector { return bindingsCollector{c} }

func (b bindingsCollector) Describe(ch chan<- *prometheus.Desc) {
	(&affinity.Stores{}).Describe(ch)
}

func (b bindingsCollector) Collect(ch chan<- prometheus.Metric) {
	if g := b.c.current(); g != nil {
		g.deps.Affinity.Collect(ch)
	}
}

// Membership returns the membership interface for changes of one origin (control.OriginAdmin,
// control.OriginDNS): engines it adds are listed with that origin.
func (s *Server) Membership(origin string) control.Membership {
	return originMembership{s, origin}
}

type originMembership struct {
	c      *Server
	origin string
}

func (o originMembership) Add(e plan.Engine) error { return o.c.addEngine(e, o.origin) }
func (o originMembership) Drain(id string) error   { return o.c.drainEngine(id, o.origin) }
func (o originMembership) Remove(id string) error  { return o.c.removeEngine(id, o.origin) }

// join makes e a serving member: a fresh worker with its breaker, load slot, prefix
// index entries and metrics. Call with f.mu held; publishing it to the registry is the
// caller's.
func (c *Server) join(g *generation, e plan.Engine, origin string) *member {
	w := engine.New(e)
	w.SetIndex(c.table.Add(e))
	w.SetBreaker(newBreaker(g.plan.Breaker, c.opts.Clock))
	g.deps.AddEngine(e)
	m := &member{engine: e, worker: w, origin: origin}
	// A replaced engine, still finishing its requests, hands its id's series over.
	for _, old := range c.fleet.members {
		if old.leaving && old.engine.ID == e.ID {
			for _, col := range old.collectors {
				c.metrics.reg.Unregister(col)
			}
			old.collectors = nil
		}
	}
	c.metrics.registerEngine(c, m)
	c.fleet.members[e.ID] = m
	if !slices.Contains(c.fleet.order, e.ID) {
		c.fleet.order = append(c.fleet.order, e.ID)
	}
	return m
}

// leave takes members out of service: out of the registry (no new picks), their
// KV-event subscriptions stopped and their state in the policy indexes, the load table
// and the bindings dropped (their monitoring stops with the caller's publish or
// SetEngines). Each is listed as leaving until the requests it serves finish, then
// forgotten with its metric series. Call with f.mu held.
func (c *Server) leave(g *generation, ms []*member) {
	if len(ms) == 0 {
		return
	}
	f := &c.fleet
	for _, m := range ms {
		m.worker.Drain()
		m.leaving = true
		if c.reg.Get(m.engine.ID) == m.worker {
			c.reg.Remove(m.engine.ID)
		}
	}
	if f.subs != nil {
		c.logErrs("KV-event subscription", f.subs.Set(f.engines()))
	}
	for _, m := range ms {
		g.deps.DropEngine(m.engine.ID)
		c.table.Remove(m.engine.ID)
		// A replaced member's state goes now; it is listed until its requests finish
		// under the worker that served them.
		key := m.engine.ID
		if f.members[key] == m {
			delete(f.members, key)
		}
		f.members[leavingKey(m)] = m
		go c.forgetWhenIdle(m)
	}
}

// leavingKey lists a leaving member apart from a member with the same id (a replaced
// engine, or one added again).
func leavingKey(m *member) string { return fmt.Sprintf("%s (leaving %p)", m.engine.ID, m.worker) }

// forgetWhenIdle waits for a leaving member's requests to finish (or the router to stop
// hard), then forgets its listing and metric series.
func (c *Server) forgetWhenIdle(m *member) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
wait:
	for m.worker.Inflight() > 0 {
		select {
		case <-c.hardStop.Done():
			break wait
		case <-t.C:
		}
	}
	c.fleet.mu.Lock()
	defer c.fleet.mu.Unlock()
	defer c.fleet.republish()
	delete(c.fleet.members, leavingKey(m))
	if c.fleet.members[m.engine.ID] == nil {
		c.fleet.order = slices.DeleteFunc(c.fleet.order, func(id string) bool { return id == m.engine.ID })
		c.metrics.forgetEngine(m)
	}
	// Otherwise the id is back with another worker, which took over its series.
	c.log.Info("engine forgotten", "engine", m.engine.ID, "origin", m.origin)
}

// publish swaps in a generation of the current one with the fleet's engines, after a
// membership change. Call with f.mu held.
func (c *Server) publish() *generation {
	g := c.current()
	np := *g.plan
	np.Engines = c.fleet.engines()
	ng := *g
	ng.plan, ng.number = &np, g.number+1
	ng.models = g.models.Over(&np)
	ng.routes = ng.buildRoutes()
	c.monitor.SetEngines(np.Engines)
	c.metrics.zeroSeries(&np)
	c.gen.Store(&ng)
	c.active.changed(&np)
	return &ng
}

// maxMembers bounds the engines added at run time: the admin API and discovery grow the
// fleet, and each engine costs polling, a load slot and series.
const maxMembers = 4096

func (c *Server) addEngine(e plan.Engine, origin string) error {
	f := &c.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	g := c.current()
	if err := control.CheckEngine(g.plan, f.inServiceMembers(), e); err != nil {
		return err
	}
	if len(f.members) >= f.maxMembers {
		return &control.MembershipError{Status: 409, Msg: fmt.Sprintf("engine %q: the router has %d engines, its maximum: remove engines first", e.ID, len(f.members))}
	}
	m := c.join(g, e, origin)
	c.reg.Put(m.worker)
	defer f.republish()
	if f.subs != nil {
		c.logErrs("KV-event subscription", f.subs.Set(f.engines()))
	}
	ng := c.publish()
	f.metrics.Changes.WithLabelValues("added", origin).Inc()
	c.log.Info("engine added", "engine", e.ID, "url", plan.RedactURL(e.URL), "model", e.Model, "role", e.Role, "origin", origin, "generation", ng.number)
	return nil
}

// memberOf returns the serving or draining member with the id, or a 404 naming the
// members.
func (f *fleet) memberOf(id string) (*member, error) {
	if m := f.members[id]; m != nil && !m.leaving {
		return m, nil
	}
	ids := make([]string, 0, len(f.order))
	for _, id := range f.order {
		if m := f.members[id]; m != nil && !m.leaving {
			ids = append(ids, id)
		}
	}
	return nil, &control.MembershipError{Status: 404, Msg: fmt.Sprintf("no engine %q is a member (members: %s): see GET /admin/state", id, strings.Join(ids, ", "))}
}

// withMember runs change on the serving or draining member with the id, under f.mu.
func (c *Server) withMember(id string, change func(*member)) error {
	f := &c.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.memberOf(id)
	if err == nil {
		change(m)
		f.republish()
	}
	return err
}

func (c *Server) drainEngine(id, origin string) error {
	return c.withMember(id, func(m *member) {
		if m.worker.Draining() {
			return
		}
		m.worker.Drain()
		c.fleet.metrics.Changes.WithLabelValues("drained", origin).Inc()
		c.log.Info("engine draining", "engine", id, "inflight", m.worker.Inflight(), "origin", origin)
	})
}

func (c *Server) removeEngine(id, origin string) error {
	return c.withMember(id, func(m *member) {
		c.leave(c.current(), []*member{m})
		ng := c.publish()
		c.fleet.metrics.Changes.WithLabelValues("removed", origin).Inc()
		c.log.Info("engine removed", "engine", id, "inflight", m.worker.Inflight(), "origin", origin, "generation", ng.number)
	})
}

func (c *Server) logErrs(what string, errs []error) {
	for _, err := range errs {
		c.log.Error(what, "error", err)
	}
}

// Reload swaps in a plan compiled from the configuration files: requests in flight finish
// on the generation they started with, and new ones use the new plan. Configured engines
// that stay with the same identity (every engine field) keep their worker, load, health,
// breaker (with the plan's new breaker settings), prefix index entries and bindings;
// changed ones are replaced with fresh state;
// configured engines no longer in the plan leave as Remove does. Engines added at run
// time (admin, dns) stay unless the plan configures the same id, which then takes over,
// or no longer serves their model and role. A plan changing a setting only a restart
// applies is refused with *control.ReloadError, as is one that cannot be built.
func (c *Server) Reload(p *plan.Plan) (res control.ReloadResult, err error) {
	f := &c.fleet
	// Discovery follows changed engines_from_dns once the fleet is unlocked: its rounds
	// change the fleet too; the new generation's loading garbage is returned then, outside
	// the lock.
	defer func() {
		if err == nil {
			c.followDNS(p)
			c.settle()
		}
	}()
	f.mu.Lock()
	defer f.mu.Unlock()
	g := c.current()
	if fixed := control.RestartOnly(g.plan, p); len(fixed) > 0 {
		return c.refuseReload("refused", fmt.Sprintf("%s changed, which only a restart applies: restore the running value, or restart the router", strings.Join(fixed, ", ")))
	}
	current := f.inService()
	merged, drops := control.MergeRunTime(p, f.inServiceMembers())
	dropped := make([]string, len(drops))
	for i, d := range drops {
		dropped[i] = d.Engine.ID
		c.log.Warn("reload drops a run-time engine", "engine", d.Engine.ID, "origin", d.Origin, "reason", d.Reason.Error())
	}
	deps, err := g.deps.Next(merged, nil)
	if err != nil {
		return c.refuseReload("failed", fmt.Sprintf("building policy state: %v", err))
	}
	ng, err := c.newGeneration(merged, deps, g.number+1)
	if err != nil {
		return c.refuseReload("failed", err.Error())
	}
	ng.edge.configHash = configHash(p) // the plan as configured, without run-time engines
	// Commit: nothing below fails.
	res = c.changeMembers(g, ng, p, current)
	res.Dropped, res.Generation = dropped, ng.number
	c.swapIn(g, ng)
	c.countReload(res)
	return res, nil
}

// refuseReload counts a refused or failed reload and says why; the running plan stays.
func (c *Server) refuseReload(result string, errs ...string) (control.ReloadResult, error) {
	c.fleet.metrics.Reloads.WithLabelValues(result).Inc()
	c.log.Error("reload refused; the running plan stays", "errors", strings.Join(errs, "; "))
	return control.ReloadResult{}, &control.ReloadError{Errors: errs, Failed: result == "failed"}
}

// inService returns the members serving or draining, by id. Call with f.mu held.
func (f *fleet) inService() map[string]*member {
	out := map[string]*member{}
	for id, m := range f.members {
		if !m.leaving {
			out[id] = m
		}
	}
	return out
}

// inServiceMembers lists the members serving or draining, in fleet order. Call with
// f.mu held.
func (f *fleet) inServiceMembers() []control.Member {
	out := make([]control.Member, 0, len(f.order))
	for _, id := range f.order {
		if m := f.members[id]; m != nil && !m.leaving {
			out = append(out, control.Member{Engine: m.engine, Origin: m.origin, State: m.state()})
		}
	}
	return out
}

// changeMembers moves the fleet from generation g's engines to ng's, as
// control.DiffMembers says, p being the plan as configured: a kept engine stays with
// its state and the new breaker settings, and the config takes it over if it now
// configures it; a replaced or removed one leaves (see leave); new ones join. The
// fleet's order becomes ng's. Call with f.mu held.
func (c *Server) changeMembers(g, ng *generation, p *plan.Plan, current map[string]*member) control.ReloadResult {
	f := &c.fleet
	res := control.DiffMembers(f.inServiceMembers(), ng.plan.Engines)
	configured := map[string]bool{}
	for _, e := range p.Engines {
		configured[e.ID] = true
	}
	kept := map[string]bool{}
	for _, id := range res.Kept {
		kept[id] = true
		m := current[id]
		if configured[id] {
			m.origin = control.OriginConfig // the config takes over a run-time engine
		}
		if b := m.worker.Breaker(); b != nil && ng.plan.Breaker != g.plan.Breaker {
			b.Configure(breakerSettings(ng.plan.Breaker))
		}
	}
	var leaving []*member
	for _, id := range f.order {
		if m := current[id]; m != nil && !kept[id] {
			leaving = append(leaving, m)
		}
	}
	c.leave(ng, leaving)
	for _, e := range ng.plan.Engines {
		if f.members[e.ID] != nil {
			continue
		}
		origin := control.OriginConfig
		if !configured[e.ID] {
			origin = current[e.ID].origin
		}
		c.reg.Put(c.join(ng, e, origin).worker)
	}
	order := make([]string, 0, len(f.order))
	for _, e := range ng.plan.Engines {
		order = append(order, e.ID)
	}
	for _, id := range f.order {
		if !slices.Contains(order, id) {
			order = append(order, id) // leaving
		}
	}
	f.order = order
	return res
}

// swapIn makes ng, built over the fleet's new members, the current generation in place
// of g: KV-event subscriptions, the affinity sweeper, metrics and monitoring follow it.
// Call with f.mu held.
func (c *Server) swapIn(g, ng *generation) {
	f := &c.fleet
	if f.subs != nil {
		c.logErrs("KV-event subscription", f.subs.Set(f.engines()))
	}
	if ng.deps.Affinity != g.deps.Affinity {
		ng.deps.Affinity.SetLogger(c.log)
		c.runAffinity(ng.deps.Affinity)
	}
	names := planModels(ng.plan)
	for _, old := range planModels(g.plan) {
		if !slices.Contains(names, old) {
			c.metrics.forgetModel(old)
		}
	}
	c.metrics.setModels(names)
	c.metrics.zeroSeries(ng.plan)
	c.monitor.SetEngines(ng.plan.Engines)
	c.gen.Store(ng)
	f.republish()
	c.active.changed(ng.plan)
}

// countReload counts an applied reload and its membership changes, and logs it.
func (c *Server) countReload(res control.ReloadResult) {
	c.fleet.metrics.CountReload(res)
	c.log.Info("reloaded", "generation", res.Generation, "added", res.Added, "replaced", res.Replaced,
		"removed", res.Removed, "kept", len(res.Kept), "dropped", res.Dropped)
}

// startFleet starts the background tasks that follow the membership: KV-event
// subscriptions and the affinity sweeper. Serve calls it once; they stop with ctx.
func (c *Server) startFleet(ctx context.Context) error {
	f := &c.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	g := c.current()
	f.bgCtx = ctx
	f.subs = kv.NewSubscriptions(ctx, g.deps.KV, c.log)
	if errs := f.subs.Set(f.engines()); len(errs) > 0 {
		return errs[0]
	}
	c.runAffinity(g.deps.Affinity)
	return nil
}

// runAffinity runs the sweeper of st in place of the previous stores'. Call with f.mu held.
func (c *Server) runAffinity(st *affinity.Stores) {
	f := &c.fleet
	if f.bgCtx == nil {
		return
	}
	if f.stopAffinity != nil {
		f.stopAffinity()
	}
	ctx, stop := context.WithCancel(f.bgCtx)
	f.stopAffinity, f.affinityStore = stop, st
	f.bg.Go(func() { st.Run(ctx) })
}

// waitFleet waits for the background tasks after their context is done.
func (c *Server) waitFleet() {
	c.fleet.bg.Wait()
	c.fleet.mu.Lock()
	subs := c.fleet.subs
	c.fleet.mu.Unlock()
	if subs != nil {
		subs.Wait()
	}
}

// republish publishes a copy of the members in fleet order, each engine's leaving
// workers after its serving one. Call with f.mu held, after every change.
func (f *fleet) republish() {
	out := make([]member, 0, len(f.members))
	for _, id := range f.order {
		if m := f.members[id]; m != nil {
			out = append(out, *m)
		}
		for key, m := range f.members {
			if key != id && m.engine.ID == id {
				out = append(out, *m)
			}
		}
	}
	f.list.Store(&out)
}

// memberList returns the members as last published; it must not be modified.
func (c *Server) memberList() []member { return *c.fleet.list.Load() }
