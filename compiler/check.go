package compiler

import (
	"net"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/token"

	"github.com/routerkit/router/runtime/plan"
)

// checker runs the cross-reference rules CUE cannot express on a decoded plan. Positions
// come from the user's value, so every message points at a line the user wrote.
type checker struct {
	p       *plan.Plan
	user    cue.Value
	errs    *errorList
	engines map[string]*plan.Engine
}

func check(p *plan.Plan, user cue.Value, errs *errorList) {
	c := &checker{p: p, user: user, errs: errs, engines: map[string]*plan.Engine{}}
	c.checkListen()
	c.checkBindings()
	c.checkEngines()
	c.checkDNSSources()
	c.checkKVEvents()
	if len(p.Models) == 0 {
		c.at(sel("models"), "the configuration serves no model: add models: NAME: {buckets: [...]}")
	}
	for i := range p.Models {
		c.checkModel(&p.Models[i])
	}
}

// at reports a problem at the deepest existing user value along sels.
func (c *checker) at(sels []cue.Selector, format string, args ...any) {
	c.errs.at(c.pos(sels), cue.MakePath(sels...), format, args...)
}

func (c *checker) pos(sels []cue.Selector) token.Pos {
	for n := len(sels); n >= 0; n-- {
		if v := c.user.LookupPath(cue.MakePath(sels[:n]...)); v.Exists() && v.Pos().IsValid() {
			return v.Pos()
		}
	}
	return token.NoPos
}

func sel(parts ...any) []cue.Selector {
	out := make([]cue.Selector, len(parts))
	for i, p := range parts {
		switch p := p.(type) {
		case string:
			out[i] = cue.Str(p)
		case int:
			out[i] = cue.Index(p)
		}
	}
	return out
}

func (c *checker) checkListen() {
	_, port, err := net.SplitHostPort(c.p.Listen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		c.at(sel("listen"), "listen %q is not a host:port address with a port from 0 to 65535, e.g. \"127.0.0.1:30000\"", c.p.Listen)
	}
}

func (c *checker) checkEngines() {
	urls := map[string]string{}
	for i := range c.p.Engines {
		e := &c.p.Engines[i]
		if first, ok := c.engines[e.ID]; ok {
			c.at(sel("engines", i, "id"), "duplicate engine id %q (also used for %s): engine ids must be unique", e.ID, plan.RedactURL(first.URL))
			continue
		}
		c.engines[e.ID] = e
		url := strings.TrimRight(e.URL, "/")
		if other, ok := urls[url]; ok {
			c.at(sel("engines", i, "url"), "engine %q has the same url as engine %q: each engine is one endpoint; remove the duplicate", e.ID, other)
		}
		urls[url] = e.ID
		if e.Role != plan.RolePrefill && e.BootstrapPort != 0 {
			c.at(sel("engines", i, "bootstrap_port"), "bootstrap_port is only used by prefill engines, and %q is %s: remove it", e.ID, e.Role)
		}
		if c.p.Model(e.Model) == nil {
			c.at(sel("engines", i, "model"), "engine %q serves model %q, which has no entry under models: add models: %q: {buckets: [...]} or fix the model name", e.ID, e.Model, e.Model)
		}
	}
}

func (c *checker) checkModel(m *plan.Model) {
	at := sel("models", m.Name)
	var plain, pd []string
	for _, e := range c.fleet() {
		if e.Model != m.Name {
			continue
		}
		if e.Role == plan.RolePlain {
			plain = append(plain, e.ID)
		} else {
			pd = append(pd, e.ID)
		}
	}
	switch {
	case len(plain) > 0 && len(pd) > 0:
		c.at(at, "model %q mixes plain engines (%s) with prefill/decode engines (%s): a model's engines are all plain or all prefill/decode; move one kind to another model", m.Name, strings.Join(plain, ", "), strings.Join(pd, ", "))
	case len(plain) == 0 && len(pd) == 0:
		c.at(at, "model %q has no engines: add engines with model: %q, or an engines_from_dns entry that finds them", m.Name, m.Name)
	}
	c.checkPDProtocols(m)
	c.checkSLO(m)
	if len(m.Buckets) == 0 {
		c.at(at, "model %q has no buckets: add at least one bucket", m.Name)
	}
	c.checkTokenizer(m)
	ids := map[string]int{}
	for i := range m.Buckets {
		b := &m.Buckets[i]
		bat := append(at[:len(at):len(at)], sel("buckets", i)...)
		switch first, dup := ids[b.ID]; {
		case b.ID == "":
			c.at(append(bat, cue.Str("id")), "bucket id must not be empty")
		case dup:
			c.at(append(bat, cue.Str("id")), "duplicate bucket id %q (also bucket %d of model %q): bucket ids must be unique within a model", b.ID, first, m.Name)
		default:
			ids[b.ID] = i
		}
		if b.Limits.Max != nil && b.Limits.Min > *b.Limits.Max {
			c.at(append(bat, sel("limits", "min")...), "limits.min (%d) is greater than limits.max (%d): the input range is inclusive and must not be empty", b.Limits.Min, *b.Limits.Max)
		}
		if b.MaxContextTokens != nil && *b.MaxContextTokens < b.Limits.Min {
			c.at(append(bat, cue.Str("max_context_tokens")), "max_context_tokens (%d) is below limits.min (%d): no request can fit this bucket; raise max_context_tokens or lower limits.min", *b.MaxContextTokens, b.Limits.Min)
		}
		c.checkBucketGroups(m, b, bat, len(pd) > 0)
	}
}

func (c *checker) checkBucketGroups(m *plan.Model, b *plan.Bucket, at []cue.Selector, pdModel bool) {
	gat := append(at[:len(at):len(at)], cue.Str("groups"))
	switch {
	case b.Groups.Plain != nil:
		if pdModel {
			c.at(append(gat, cue.Str("plain")), "bucket %q has a plain group but model %q is served by prefill/decode engines: use groups.pd with prefill and decode", b.ID, m.Name)
		}
		c.checkGroup(m, b.Groups.Plain, plan.RolePlain, append(gat, cue.Str("plain")))
	case b.Groups.PD != nil:
		pat := append(gat, cue.Str("pd"))
		if !pdModel {
			c.at(pat, "bucket %q has prefill/decode groups but model %q is served by plain engines: use groups.plain", b.ID, m.Name)
		}
		c.checkGroup(m, &b.Groups.PD.Prefill, plan.RolePrefill, append(pat[:len(pat):len(pat)], cue.Str("prefill")))
		c.checkGroup(m, &b.Groups.PD.Decode, plan.RoleDecode, append(pat[:len(pat):len(pat)], cue.Str("decode")))
		c.checkPDPairs(m, b, pat)
	}
}

func (c *checker) checkGroup(m *plan.Model, g *plan.Group, role plan.Role, at []cue.Selector) {
	seen := map[string]bool{}
	for i, id := range g.WorkerIDs {
		wat := append(at[:len(at):len(at)], sel("worker_ids", i)...)
		e, ok := c.engines[id]
		switch {
		case seen[id]:
			c.at(wat, "engine %q is listed twice in worker_ids: list each engine once", id)
		case !ok && c.dnsSourceOf(id) != nil:
			c.at(wat, "engine %q would be found by engines_from_dns %q, and worker_ids can name only engines declared under engines: discovered engines come and go, so omit worker_ids to use every %s engine of model %q", id, c.dnsSourceOf(id).ID, role, m.Name)
		case !ok:
			c.at(wat, "unknown engine %q: worker_ids must name engines declared under engines (%s engines of model %q: %s)", id, role, m.Name, c.known(m.Name, role))
		case e.Model != m.Name:
			c.at(wat, "engine %q serves model %q, not %q: list engines of model %q here", id, e.Model, m.Name, m.Name)
		case e.Role != role:
			c.at(wat, "engine %q is a %s engine but this is a %s group: list %s engines here", id, e.Role, role, role)
		}
		seen[id] = true
	}
	pat := append(at[:len(at):len(at)], cue.Str("policy"))
	pol := &g.Policy
	if pol.Type == plan.CacheAware && role == plan.RoleDecode {
		c.at(append(pat, cue.Str("type")), "cache_aware cannot select decode engines: prefix reuse happens at prefill; use power_of_two for the decode group")
	}
	if pol.SaturationQueueFloor != 0 {
		switch {
		case pol.WorkerQueueLimit == 0:
			c.at(append(pat, cue.Str("saturation_queue_floor")), "saturation_queue_floor requires worker_queue_limit: set worker_queue_limit (at least %d) or remove saturation_queue_floor", pol.SaturationQueueFloor)
		case pol.SaturationQueueFloor > pol.WorkerQueueLimit:
			c.at(append(pat, cue.Str("saturation_queue_floor")), "saturation_queue_floor (%d) is greater than worker_queue_limit (%d): the floor must be at most the limit", pol.SaturationQueueFloor, pol.WorkerQueueLimit)
		}
	}
	c.checkPrefixShare(pol.PrefixSource, append(pat, cue.Str("prefix_source")))
	if pol.CandidateMinWorkers > pol.CandidateMaxWorkers {
		c.at(append(pat, cue.Str("candidate_min_workers")), "candidate_min_workers (%d) is greater than candidate_max_workers (%d): the minimum must be at most the maximum", pol.CandidateMinWorkers, pol.CandidateMaxWorkers)
	}
}

// known lists the engine ids a group of role in model could name.
func (c *checker) known(model string, role plan.Role) string {
	var ids []string
	for _, e := range c.fleet() {
		if e.Model == model && e.Role == role {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}
