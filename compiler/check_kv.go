package compiler

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"cuelang.org/go/cue"

	"github.com/routerkit/router/runtime/plan"
)

// checkKVEvents checks the engines' KV-event settings across engines. In bind mode the
// router listens and every engine that dials the same endpoint is told apart by the
// message topic alone, so each needs a topic of its own there. In connect mode the
// router dials the engine's publisher, which a wildcard address cannot name.
func (c *checker) checkKVEvents() {
	topics := map[string]string{} // bind endpoint + topic -> engine id
	binds := map[string]string{}  // bind port -> endpoint as first written
	for i := range c.p.Engines {
		e := &c.p.Engines[i]
		kv := e.KVEvents
		if kv == nil {
			continue
		}
		at := sel("engines", i, "kv_events")
		host := endpointHost(kv.Endpoint)
		c.checkAllowFrom(e.ID, kv, append(at, sel("allow_from")...))
		switch kv.Mode {
		case plan.KVBind:
			if kv.Topic == "" {
				c.at(append(at, sel("topic")...), "engine %q binds its KV events endpoint, where publishers are told apart by topic only: set kv_events.topic to the topic the engine publishes, e.g. \"kv@%s@%s\"", e.ID, e.ID, e.Model)
				continue
			}
			if first, ok := binds[bindKey(kv.Endpoint)]; ok && listenHost(first) != listenHost(kv.Endpoint) {
				c.at(append(at, sel("endpoint")...), "engine %q binds %s, but another engine binds the same port as %s: the router listens once per port, so write the same endpoint for both", e.ID, kv.Endpoint, first)
				continue
			}
			binds[bindKey(kv.Endpoint)] = kv.Endpoint
			key := bindKey(kv.Endpoint) + " " + kv.Topic
			if other, ok := topics[key]; ok {
				c.at(append(at, sel("topic")...), "engines %q and %q both publish topic %q to bind endpoint %s: give each engine its own topic", other, e.ID, kv.Topic, kv.Endpoint)
				continue
			}
			topics[key] = e.ID
		default:
			if host == "" || host == "*" || net.ParseIP(host).IsUnspecified() {
				c.at(append(at, sel("endpoint")...), "engine %q: in connect mode the router dials the engine's publisher, so kv_events.endpoint must name the engine's address, not %q; or set kv_events.mode: \"bind\" to have the router listen there", e.ID, kv.Endpoint)
			}
		}
	}
}

// checkAllowFrom checks that kv_events.allow_from is of bind mode and each entry an IP
// address, a CIDR prefix or a host name; names are resolved when the subscription starts.
func (c *checker) checkAllowFrom(id string, kv *plan.KVEvents, at []cue.Selector) {
	if len(kv.AllowFrom) > 0 && kv.Mode != plan.KVBind {
		c.at(at, "engine %q: kv_events.allow_from lists who may dial the router's KV-event listener, which only bind mode has: remove it, or set kv_events.mode: \"bind\"", id)
		return
	}
	for _, a := range kv.AllowFrom {
		if _, err := netip.ParseAddr(a); err == nil {
			continue
		}
		if _, err := netip.ParsePrefix(a); err == nil {
			continue
		}
		if !validHostname(a) {
			c.at(at, "engine %q: kv_events.allow_from entry %q is neither an IP address, a CIDR prefix (\"10.0.0.0/24\") nor a host name", id, a)
		}
	}
}

// checkPDProtocols reports a prefill/decode model whose engines speak different PD
// protocols: the two halves of a pair must agree on how the KV cache moves.
func (c *checker) checkPDProtocols(m *plan.Model) {
	first := map[string]string{} // protocol -> first engine id
	var order []string
	for _, e := range c.fleet() {
		if e.Model != m.Name || e.Role == plan.RolePlain {
			continue
		}
		if _, ok := first[e.PDProtocol]; !ok {
			first[e.PDProtocol] = e.ID
			order = append(order, e.PDProtocol)
		}
	}
	if len(order) > 1 {
		parts := make([]string, len(order))
		for i, p := range order {
			parts[i] = fmt.Sprintf("%s (engine %q)", p, first[p])
		}
		c.at(sel("models", m.Name), "model %q pairs prefill and decode engines of different PD protocols: %s; set the same pd_protocol on all of them, or use engines of one kind", m.Name, strings.Join(parts, ", "))
	}
}

// endpointHost returns the host of a "tcp://host:port" endpoint, or "" when it has none.
func endpointHost(ep string) string {
	host, _, err := net.SplitHostPort(strings.TrimPrefix(ep, "tcp://"))
	if err != nil {
		return ""
	}
	return host
}

// listenHost is the address the router listens on for a bind endpoint: "*" and an empty
// host are every interface, as 0.0.0.0.
func listenHost(ep string) string {
	if h := endpointHost(ep); h != "*" && h != "" {
		return h
	}
	return "0.0.0.0"
}

// bindKey identifies a listening socket: the port, since wildcard and named hosts of
// one port are the same listener to the engines that dial it.
func bindKey(ep string) string {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(ep, "tcp://"))
	if err != nil {
		return ep
	}
	return port
}

// validHostname reports whether s is a DNS name: dot-separated labels of letters,
// digits and hyphens, none empty or led or ended by a hyphen.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
