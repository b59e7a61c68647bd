package control

import (
	"errors"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// TestCheckEngine: an engine joins only with a unique id and url, a served model and a
// role its buckets use; each refusal carries the status that answers it and the fix.
func TestCheckEngine(t *testing.T) {
	p := &plan.Plan{Models: []plan.Model{
		{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &plan.Group{}}}}},
		{Name: "pd", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{PD: &plan.PDGroups{}}}}},
	}}
	members := []Member{{Engine: plan.Engine{ID: "E1", URL: "http://10.0.0.1:8000/", Model: "m", Role: plan.RolePlain}, Origin: OriginDNS}}
	eng := func(id, url, model string, role plan.Role) plan.Engine {
		return plan.Engine{ID: id, URL: url, Model: model, Role: role}
	}
	prefillWithPort := eng("P1", "http://10.0.0.3:8000", "pd", plan.RolePrefill)
	prefillWithPort.BootstrapPort = 8998
	plainWithPort := eng("E3", "http://10.0.0.3:8000", "m", plan.RolePlain)
	plainWithPort.BootstrapPort = 8998
	for name, tc := range map[string]struct {
		e      plan.Engine
		status int
		want   string
	}{
		"ok":                {eng("E2", "http://10.0.0.2:8000", "m", plan.RolePlain), 0, ""},
		"ok prefill":        {prefillWithPort, 0, ""},
		"missing role":      {eng("E2", "http://10.0.0.2:8000", "m", ""), 400, "id, url, model and role are required"},
		"relative url":      {eng("E2", "10.0.0.2:8000", "m", plan.RolePlain), 400, "not an absolute http:// or https:// URL"},
		"same id":           {eng("E1", "http://10.0.0.2:8000", "m", plan.RolePlain), 409, `already a member (http://10.0.0.1:8000/, from dns)`},
		"same url":          {eng("E2", "http://10.0.0.1:8000", "m", plan.RolePlain), 409, `same url as member "E1"`},
		"unknown model":     {eng("E2", "http://10.0.0.2:8000", "n", plan.RolePlain), 400, "served: m, pd"},
		"role of no bucket": {eng("E2", "http://10.0.0.2:8000", "pd", plan.RolePlain), 400, "use decode and prefill engines"},
		"port on plain":     {plainWithPort, 400, "bootstrap_port is only used by prefill engines"},
	} {
		err := CheckEngine(p, members, tc.e)
		var me *MembershipError
		switch {
		case tc.status == 0 && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case tc.status != 0 && (!errors.As(err, &me) || me.Status != tc.status || !strings.Contains(me.Msg, tc.want)):
			t.Errorf("%s: %v, want %d saying %q", name, err, tc.status, tc.want)
		}
	}
}

// TestRestartOnly names each setting a reload cannot apply, and nothing else.
func TestRestartOnly(t *testing.T) {
	old := &plan.Plan{Listen: "127.0.0.1:30000"}
	changed := *old
	changed.Listen, changed.Limits.MaxConnections, changed.ShutdownGraceSecs = "0.0.0.0:30000", 10, 99
	changed.ClientTransport = plan.ClientTransportNetHTTP
	got := RestartOnly(old, &changed)
	if len(got) != 3 || got[0] != "listen (running 127.0.0.1:30000, config 0.0.0.0:30000)" || got[1] != "limits.max_connections" || got[2] != "client_transport" {
		t.Errorf("RestartOnly = %q", got)
	}
	if got := RestartOnly(old, old); got != nil {
		t.Errorf("RestartOnly of a plan with itself = %q", got)
	}
}

// TestReloadPlan: a reload keeps the run-time engines its plan still serves and does not
// configure, drops the others, and sorts the members into kept, replaced, removed and
// added.
func TestReloadPlan(t *testing.T) {
	plain := func(id, url string) plan.Engine {
		return plan.Engine{ID: id, URL: url, Model: "m", Role: plan.RolePlain}
	}
	p := &plan.Plan{
		Models: []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &plan.Group{}}}}}},
		Engines: []plan.Engine{
			plain("C1", "http://10.0.0.1:8000"),  // configured before and now, the same
			plain("C2", "http://10.0.0.22:8000"), // configured before, with another url now
			plain("A2", "http://10.0.0.12:8000"), // added at run time, now configured
			plain("C3", "http://10.0.0.3:8000"),  // new in the config
		},
	}
	otherModel := plain("D2", "http://10.0.0.14:8000")
	otherModel.Model = "gone"
	members := []Member{
		{Engine: plain("C1", "http://10.0.0.1:8000"), Origin: OriginConfig},
		{Engine: plain("C2", "http://10.0.0.2:8000"), Origin: OriginConfig},
		{Engine: plain("C9", "http://10.0.0.9:8000"), Origin: OriginConfig}, // no longer configured
		{Engine: plain("A1", "http://10.0.0.11:8000"), Origin: OriginAdmin},
		{Engine: plain("A2", "http://10.0.0.12:8000"), Origin: OriginAdmin},
		{Engine: plain("D1", "http://10.0.0.3:8000"), Origin: OriginDNS}, // C3's url now
		{Engine: otherModel, Origin: OriginDNS},
	}
	merged, dropped := MergeRunTime(p, members)
	var ids []string
	for _, e := range merged.Engines {
		ids = append(ids, e.ID)
	}
	if got := strings.Join(ids, " "); got != "C1 C2 A2 C3 A1" {
		t.Errorf("merged engines %s, want the config's then A1", got)
	}
	if len(dropped) != 2 || dropped[0].Engine.ID != "D1" || !strings.Contains(dropped[0].Reason.Error(), "same url") ||
		dropped[1].Engine.ID != "D2" || !strings.Contains(dropped[1].Reason.Error(), `serves model "gone"`) {
		t.Errorf("dropped %+v", dropped)
	}
	res := DiffMembers(members, merged.Engines)
	for name, got := range map[string][]string{"kept C1 A1 A2": res.Kept, "replaced C2": res.Replaced, "removed C9 D1 D2": res.Removed, "added C3": res.Added} {
		if want := strings.SplitN(name, " ", 2)[1]; strings.Join(got, " ") != want {
			t.Errorf("%s: got %q", name, got)
		}
	}
}
