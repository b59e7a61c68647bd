package compiler

import (
	"net"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/plan"
)

// defaultSourceID names a DNS source after its name, or after its SRV name without the
// leading _service._proto labels, which an engine id cannot start with.
func defaultSourceID(s plan.DNSSource) string {
	name := s.Name
	if name == "" {
		name = s.SRV
		for strings.HasPrefix(name, "_") {
			i := strings.IndexByte(name, '.')
			if i < 0 {
				break
			}
			name = name[i+1:]
		}
	}
	return strings.TrimSuffix(name, ".")
}

// fleet is every engine a model may have: the static engines and one stand-in per DNS
// source, its template, whose id says where it comes from. The model-shape, PD-protocol
// and tokenizer-kind rules hold for discovered engines as for written ones.
func (c *checker) fleet() []plan.Engine {
	out := make([]plan.Engine, 0, len(c.p.Engines)+len(c.p.EnginesFromDNS))
	out = append(out, c.p.Engines...)
	for _, s := range c.p.EnginesFromDNS {
		e := s.Engine
		e.ID = s.ID + " (from DNS)"
		out = append(out, e)
	}
	return out
}

// checkDNSSources checks each engines_from_dns entry: exactly one of name and srv, a port
// where the records carry none, a served model, ids that cannot collide, and KV-event
// endpoints that tell the discovered engines apart.
func (c *checker) checkDNSSources() {
	ids := map[string]int{}
	for i := range c.p.EnginesFromDNS {
		s := &c.p.EnginesFromDNS[i]
		at := sel("engines_from_dns", i)
		switch {
		case s.Name != "" && s.SRV != "":
			c.at(append(at, sel("srv")...), "engines_from_dns entry %d sets both name and srv: name takes A/AAAA records and a port, srv takes SRV records with their ports; keep one", i)
		case s.Name == "" && s.SRV == "":
			c.at(at, "engines_from_dns entry %d sets neither name nor srv: set name (A/AAAA records, with port) or srv (SRV records)", i)
		case s.Name != "" && s.Port == 0:
			c.at(append(at, sel("name")...), "engines_from_dns %q has no port: A and AAAA records carry only addresses, so set port to the engines' port, e.g. port: 30000", s.Name)
		case s.SRV != "" && s.Port != 0:
			c.at(append(at, sel("port")...), "engines_from_dns %q takes its ports from the SRV records: remove port", s.SRV)
		}
		if first, dup := ids[s.ID]; dup {
			c.at(append(at, sel("id")...), "engines_from_dns entries %d and %d both have id %q: the id starts every discovered engine's id, so give each entry its own id", first, i, s.ID)
		} else {
			ids[s.ID] = i
		}
		if c.p.Model(s.Model) == nil {
			c.at(append(at, sel("model")...), "engines_from_dns %q serves model %q, which has no entry under models: add models: %q: {buckets: [...]} or fix the model name", s.ID, s.Model, s.Model)
		}
		if s.Role != plan.RolePrefill && s.Engine.BootstrapPort != 0 {
			c.at(append(at, sel("engine", "bootstrap_port")...), "bootstrap_port is only used by prefill engines, and engines_from_dns %q finds %s engines: remove it", s.ID, s.Role)
		}
		if s.Resolver != "" {
			host, port, err := net.SplitHostPort(s.Resolver)
			if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n <= 0 || n > 65535 {
				c.at(append(at, sel("resolver")...), "resolver %q is not a HOST:PORT address with a port from 1 to 65535, e.g. \"10.96.0.10:53\"", s.Resolver)
			}
		}
		c.checkDNSKVEvents(s, i)
	}
	for i, e := range c.p.Engines {
		for _, s := range c.p.EnginesFromDNS {
			if strings.HasPrefix(e.ID, s.ID+":") {
				c.at(sel("engines", i, "id"), "engine id %q starts with %q, which names the engines engines_from_dns %q finds: rename the engine", e.ID, s.ID+":", s.ID)
			}
		}
	}
}

// checkDNSKVEvents: every engine of a source gets the same kv_events but for {host}, so
// without it in a connect endpoint they would all dial one publisher, and without it in
// a bind topic their events could not be told apart.
func (c *checker) checkDNSKVEvents(s *plan.DNSSource, i int) {
	kv := s.Engine.KVEvents
	if kv == nil {
		return
	}
	c.checkAllowFrom(s.ID, kv, sel("engines_from_dns", i, "engine", "kv_events", "allow_from"))
	switch kv.Mode {
	case plan.KVBind:
		if !strings.Contains(kv.Topic, plan.HostPlaceholder) {
			c.at(sel("engines_from_dns", i, "engine", "kv_events", "topic"), "engines_from_dns %q binds its KV events endpoint, where publishers are told apart by topic: put {host} in kv_events.topic (the engine's address), e.g. \"kv@{host}\", and have each engine publish that topic", s.ID)
		}
	default:
		if !strings.Contains(kv.Endpoint, plan.HostPlaceholder) {
			c.at(sel("engines_from_dns", i, "engine", "kv_events", "endpoint"), "engines_from_dns %q: in connect mode the router dials each engine's publisher, so write {host} for the engine's address in kv_events.endpoint, e.g. \"tcp://{host}:5557\"", s.ID)
		}
	}
}

// dnsSourceOf returns the DNS source whose engines' ids start like id, or nil.
func (c *checker) dnsSourceOf(id string) *plan.DNSSource {
	for i := range c.p.EnginesFromDNS {
		if s := &c.p.EnginesFromDNS[i]; strings.HasPrefix(id, s.ID+":") {
			return s
		}
	}
	return nil
}
