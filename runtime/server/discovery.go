package server

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/discovery"
	"github.com/routerkit/router/runtime/plan"
)

// dnsRunner runs the plan's engines_from_dns sources while the router serves, and runs
// them again when a reload changes them.
type dnsRunner struct {
	mu sync.Mutex
	// ctx is the background context Serve gave; nil before Serve and after shutdown.
	ctx  context.Context
	srcs []plan.DNSSource
	d    *discovery.Discovery
	stop context.CancelFunc
	wait func()
}

// dnsMembership is the fleet as discovery sees it: changes of origin dns, with "no such
// member" told apart so that a source forgets an engine removed behind its back.
type dnsMembership struct{ m control.Membership }

func (d dnsMembership) Add(e plan.Engine) error { return d.m.Add(e) }
func (d dnsMembership) Drain(id string) error   { return unknownAsDiscovery(d.m.Drain(id)) }
func (d dnsMembership) Remove(id string) error  { return unknownAsDiscovery(d.m.Remove(id)) }

func unknownAsDiscovery(err error) error {
	var me *control.MembershipError
	if errors.As(err, &me) && me.Status == 404 {
		return fmt.Errorf("%w: %w", discovery.ErrUnknownEngine, err)
	}
	return err
}

// startDNS starts discovery for srcs: one round of every source before it returns, so
// the engines found serve from the first request, then rounds in the background until
// ctx ends or stopDNS. Engines of origin dns that the sources do not account for (a
// reload removed or changed their source) are removed; the rest are taken over.
func (c *Server) startDNS(ctx context.Context, srcs []plan.DNSSource) {
	r := &c.dns
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx, r.srcs = ctx, srcs
	m := dnsMembership{originMembership{c, control.OriginDNS}}
	d := discovery.New(srcs, m, discovery.Options{Logger: c.log})
	var stale []string
	for _, mb := range c.memberList() {
		if mb.origin == control.OriginDNS && !mb.leaving && !d.Adopt(mb.engine) {
			stale = append(stale, mb.engine.ID)
		}
	}
	for _, id := range stale {
		if err := m.Remove(id); err != nil && !errors.Is(err, discovery.ErrUnknownEngine) {
			c.log.Error("removing an engine no dns source finds any more", "engine", id, "err", err)
		}
	}
	dctx, stop := context.WithCancel(ctx)
	r.d, r.stop = d, stop
	r.wait = d.Start(dctx)
}

// stopDNS stops discovery and waits for its rounds to end; the engines stay.
func (c *Server) stopDNS() {
	r := &c.dns
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != nil {
		r.stop()
		r.wait()
	}
	r.ctx, r.stop, r.wait = nil, nil, nil
}

// followDNS restarts discovery with a reloaded plan's sources when they changed. Call
// without the fleet lock: a round in progress may be waiting for it.
func (c *Server) followDNS(p *plan.Plan) {
	r := &c.dns
	r.mu.Lock()
	ctx, same := r.ctx, reflect.DeepEqual(r.srcs, p.EnginesFromDNS)
	if ctx == nil || same {
		r.mu.Unlock()
		return
	}
	if r.stop != nil {
		r.stop()
		r.wait()
	}
	r.stop, r.wait = nil, nil
	r.mu.Unlock()
	c.startDNS(ctx, p.EnginesFromDNS)
}

// dnsStatus reports the sources, or nil without any.
func (c *Server) dnsStatus() []discovery.Status {
	r := &c.dns
	r.mu.Lock()
	d := r.d
	r.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.Status()
}

// dnsCollector exposes the running discovery's series.
type dnsCollector struct{ c *Server }

func (dnsCollector) Describe(ch chan<- *prometheus.Desc) {
	discovery.New(nil, nil, discovery.Options{}).Collector().Describe(ch)
}

func (dc dnsCollector) Collect(ch chan<- prometheus.Metric) {
	r := &dc.c.dns
	r.mu.Lock()
	d := r.d
	r.mu.Unlock()
	if d != nil {
		d.Collector().Collect(ch)
	}
}
