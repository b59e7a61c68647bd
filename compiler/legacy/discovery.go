package legacy

import (
	"fmt"
	"strconv"
	"strings"
)

// Kubernetes service discovery: sgl-router and SMG watched pods (or EndpointSlices) by label
// selector. The router does not talk to the Kubernetes API; it follows a headless Service's
// DNS records (engines_from_dns, docs/serve.md). A selector names pods, not the Service that
// selects them, so the block cannot be written without guessing a name: the line is refused
// with a ready-to-edit engines_from_dns block built from the selector, namespace and port.

// discoveryArgs are the discovery flags of a parsed command line.
type discoveryArgs struct {
	enabled                bool
	namespace              *string
	port                   *int64
	plain, prefill, decode []string // selector terms
	flags                  []string // the discovery flags given, for the message
}

// SMG's default --service-discovery-port (main.rs).
const smgDiscoveryPort = 80

// discoveryFlags are the discovery flags, bound to the fields of c; withPort adds SMG's
// --service-discovery-port, which the experimental router (EndpointSlice ports) has not.
func (c *cli) discoveryFlags(withPort bool) []flagSpec {
	d := &c.discovery
	note := func(set setter) setter {
		return func(flag string, vs []string) error {
			d.flags = append(d.flags, flag)
			return set(flag, vs)
		}
	}
	specs := []flagSpec{
		{name: "--service-discovery", arity: switchFlag, set: note(switchOn(&d.enabled))},
		{name: "--service-discovery-namespace", arity: oneValue, set: note(text(&d.namespace))},
		{name: "--selector", arity: someValues, repeat: true, set: note(texts(&d.plain))},
		{name: "--prefill-selector", arity: someValues, repeat: true, set: note(texts(&d.prefill))},
		{name: "--decode-selector", arity: someValues, repeat: true, set: note(texts(&d.decode))},
	}
	if withPort {
		specs = append(specs, flagSpec{name: "--service-discovery-port", arity: oneValue, set: note(portNumber(&d.port))})
	}
	return specs
}

// discoveryRules refuses a discovery line with the engines_from_dns block that replaces it.
func (c *cli) discoveryRules(p *Errors) {
	d := &c.discovery
	if len(d.flags) == 0 {
		return
	}
	model := c.model
	if model == "" {
		model = "MODEL"
	}
	ns := "default"
	if d.namespace != nil && *d.namespace != "" {
		ns = *d.namespace
	}
	port := "PORT"
	if d.port != nil {
		port = strconv.FormatInt(*d.port, 10)
	} else if c.dialect == DialectClassic {
		port = strconv.Itoa(smgDiscoveryPort)
	}
	var entries []string
	for _, g := range []struct {
		role  string
		terms []string
	}{{"plain", d.plain}, {stagePrefill, d.prefill}, {stageDecode, d.decode}} {
		if len(g.terms) == 0 {
			continue
		}
		entries = append(entries, fmt.Sprintf("{name: %q, port: %s, model: %q, role: %q}",
			serviceName(g.terms, g.role)+"."+ns+".svc.cluster.local", port, model, g.role))
	}
	if len(entries) == 0 {
		entries = append(entries, fmt.Sprintf("{name: %q, port: %s, model: %q, role: \"plain\"}", "SERVICE."+ns+".svc.cluster.local", port, model))
	}
	p.addf("%s cannot be migrated: the router does not watch Kubernetes pods; it follows the DNS records of a headless Service (engines_from_dns, docs/serve.md), re-resolved every 10 s. "+
		"Create a headless Service (clusterIP: None) per role whose selector is the pods' labels (%s), remove the discovery flags and migrate the rest with --worker-urls of one engine, "+
		"then replace the configuration's engines with:\n    engines_from_dns: [%s]\n  editing each name to the Service's (SERVICE.NAMESPACE.svc.cluster.local)%s",
		strings.Join(dedupe(d.flags), " "), selectorText(d), strings.Join(entries, ", "), bootstrapHint(d))
}

// serviceName guesses an editable Service name from selector terms: the first term's value
// (app=sglang-worker gives sglang-worker), else the role.
func serviceName(terms []string, role string) string {
	for _, t := range terms {
		if _, v, ok := strings.Cut(t, "="); ok && strings.Trim(v, "=") != "" {
			return strings.Trim(v, "=")
		}
	}
	return "sglang-" + role
}

// selectorText quotes the selectors given, per role.
func selectorText(d *discoveryArgs) string {
	var parts []string
	for _, g := range []struct {
		flag  string
		terms []string
	}{{"--selector", d.plain}, {"--prefill-selector", d.prefill}, {"--decode-selector", d.decode}} {
		if len(g.terms) > 0 {
			parts = append(parts, g.flag+" "+strings.Join(g.terms, " "))
		}
	}
	if len(parts) == 0 {
		return "no --selector was given"
	}
	return strings.Join(parts, "; ")
}

// bootstrapHint says where a discovered prefill pod's bootstrap port goes.
func bootstrapHint(d *discoveryArgs) string {
	if len(d.prefill) == 0 {
		return ""
	}
	return "; a prefill pod's bootstrap port (annotation sglang.ai/bootstrap-port) becomes engine: {bootstrap_port: N} of its entry, 8998 when omitted"
}

// dedupe keeps the first of each string, in order.
func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
