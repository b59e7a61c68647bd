package control

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/routerkit/router/runtime/plan"
)

// CheckEngine reports why e cannot join a fleet serving p beside members (those in
// service), with the fix: a *MembershipError whose status answers it. Every engine added
// at run time (POST /admin/engines, POST /workers, DNS discovery) and every run-time
// engine a reload keeps passes here.
func CheckEngine(p *plan.Plan, members []Member, e plan.Engine) error {
	bad := func(status int, format string, args ...any) error {
		return &MembershipError{Status: status, Msg: fmt.Sprintf(format, args...)}
	}
	if e.ID == "" || e.URL == "" || e.Model == "" || e.Role == "" {
		return bad(400, "engine %q: id, url, model and role are required", e.ID)
	}
	if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad(400, "engine %q: url %q is not an absolute http:// or https:// URL", e.ID, plan.RedactURL(e.URL))
	}
	for _, m := range members {
		if m.Engine.ID == e.ID {
			return bad(409, "engine id %q is already a member (%s, from %s): choose another id, or remove it first", e.ID, plan.RedactURL(m.Engine.URL), m.Origin)
		}
	}
	for _, m := range members {
		if strings.TrimRight(m.Engine.URL, "/") == strings.TrimRight(e.URL, "/") {
			return bad(409, "engine %q has the same url as member %q: each engine is one endpoint; remove %q first to replace it", e.ID, m.Engine.ID, m.Engine.ID)
		}
	}
	model := p.Model(e.Model)
	if model == nil {
		names := make([]string, len(p.Models))
		for i, m := range p.Models {
			names[i] = m.Name
		}
		return bad(400, "engine %q serves model %q, which this router does not serve (served: %s): fix the model, or add the model to the config and reload", e.ID, e.Model, strings.Join(names, ", "))
	}
	if roles := BucketRoles(model); !slices.Contains(roles, e.Role) {
		return bad(400, "engine %q has role %s, but the buckets of model %q use %s engines: fix the role", e.ID, e.Role, e.Model, joinRoles(roles))
	}
	if e.Role != plan.RolePrefill && e.BootstrapPort != 0 {
		return bad(400, "engine %q: bootstrap_port is only used by prefill engines, and it is %s: remove it", e.ID, e.Role)
	}
	return nil
}

// BucketRoles lists the engine roles a model's buckets pick from, sorted.
func BucketRoles(m *plan.Model) []plan.Role {
	var out []plan.Role
	for _, b := range m.Buckets {
		switch {
		case b.Groups.PD != nil:
			out = append(out, plan.RolePrefill, plan.RoleDecode)
		case b.Groups.Plain != nil:
			out = append(out, plan.RolePlain)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func joinRoles(roles []plan.Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, " and ")
}

// RestartOnly lists the settings that differ between two plans and that only a restart
// applies: they size or open what the process set up once. A reload changing one is
// refused.
func RestartOnly(old, new *plan.Plan) []string {
	var out []string
	if old.Listen != new.Listen {
		out = append(out, fmt.Sprintf("listen (running %s, config %s)", old.Listen, new.Listen))
	}
	if !reflect.DeepEqual(old.Bindings, new.Bindings) {
		out = append(out, "bindings")
	}
	if old.Limits.MaxConnections != new.Limits.MaxConnections {
		out = append(out, "limits.max_connections")
	}
	if old.EngineTransport != new.EngineTransport {
		out = append(out, "engine_transport")
	}
	if old.ClientTransport != new.ClientTransport {
		out = append(out, "client_transport")
	}
	if old.Limits.MaxConnectionsPerClient != new.Limits.MaxConnectionsPerClient {
		out = append(out, "limits.max_connections_per_client")
	}
	if old.Limits.MaxConcurrentRequests != new.Limits.MaxConcurrentRequests {
		out = append(out, "limits.max_concurrent_requests")
	}
	if old.Queue != new.Queue {
		out = append(out, "queue")
	}
	if !reflect.DeepEqual(old.RateLimit, new.RateLimit) {
		out = append(out, "rate_limit")
	}
	if old.Health != new.Health {
		out = append(out, "health")
	}
	if !reflect.DeepEqual(old.Tracing, new.Tracing) {
		out = append(out, "tracing")
	}
	// The serving listener is plain or TLS from the start (its certificates do reload);
	// the metrics listener and the engine transports' TLS are set up once.
	if (old.TLS == nil) != (new.TLS == nil) {
		out = append(out, "tls (turned on or off)")
	}
	if !reflect.DeepEqual(old.Metrics, new.Metrics) {
		out = append(out, "metrics.listen")
	}
	if !reflect.DeepEqual(old.EngineTLS, new.EngineTLS) {
		out = append(out, "engine_tls")
	}
	return out
}

// Dropped is a run-time engine a reloaded plan no longer serves, and why.
type Dropped struct {
	Member
	Reason error
}

// MergeRunTime returns p with the engines among members (in service, in fleet order)
// that were added at run time (admin, dns), that p does not configure itself and that it
// still serves (their model and role), in fleet order, and those it no longer serves.
// A configured id takes a run-time engine over.
func MergeRunTime(p *plan.Plan, members []Member) (*plan.Plan, []Dropped) {
	merged := *p
	merged.Engines = slices.Clone(p.Engines)
	configured := configuredIDs(p)
	var dropped []Dropped
	for _, m := range members {
		if m.Origin == OriginConfig || configured[m.Engine.ID] {
			continue
		}
		others := make([]Member, len(merged.Engines))
		for i, e := range merged.Engines {
			others[i] = Member{Engine: e, State: "serving"}
		}
		if err := CheckEngine(&merged, others, m.Engine); err != nil {
			dropped = append(dropped, Dropped{m, err})
			continue
		}
		merged.Engines = append(merged.Engines, m.Engine)
	}
	return &merged, dropped
}

// DiffMembers says how a reload moves the members (in service, in fleet order) to the
// engines next: a member whose engine is in next with the same identity (every field)
// is kept, one with another identity replaced, one not in next removed; the engines of
// next that are no member are added. The lists are in fleet order, then next's.
func DiffMembers(members []Member, next []plan.Engine) (res ReloadResult) {
	want := make(map[string]plan.Engine, len(next))
	for _, e := range next {
		want[e.ID] = e
	}
	member := make(map[string]bool, len(members))
	for _, m := range members {
		member[m.Engine.ID] = true
		switch e, ok := want[m.Engine.ID]; {
		case !ok:
			res.Removed = append(res.Removed, m.Engine.ID)
		case !reflect.DeepEqual(e, m.Engine):
			res.Replaced = append(res.Replaced, m.Engine.ID)
		default:
			res.Kept = append(res.Kept, m.Engine.ID)
		}
	}
	for _, e := range next {
		if !member[e.ID] {
			res.Added = append(res.Added, e.ID)
		}
	}
	return res
}

// configuredIDs are the ids of the engines p configures.
func configuredIDs(p *plan.Plan) map[string]bool {
	out := make(map[string]bool, len(p.Engines))
	for _, e := range p.Engines {
		out[e.ID] = true
	}
	return out
}
