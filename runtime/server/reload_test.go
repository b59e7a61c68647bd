package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// Tests of reloads and run-time membership: real routers over simulated engines.

func reloadPlan(engines ...plan.Engine) *plan.Plan {
	return testPlan(engines, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
}

// kvEngine is a plain engine publishing KV events (the fleet helper points it at its
// simulated engine's publisher).
func kvEngine(id string) plan.Engine {
	e := plainEngine(id)
	e.KVEvents = &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1", Mode: plan.KVConnect}
	return e
}

// startSimEngine starts one more simulated engine of the model, outside the router's
// plan, and returns the engine as the plan would name it.
func startSimEngine(t *testing.T, p *plan.Plan, e plan.Engine, timeScale float64) plan.Engine {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.TimeScale = timeScale
	specs, err := sim.SpecsFromPlan(&plan.Plan{Engines: []plan.Engine{e}, Models: p.Models}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	specs[0].Addr = ""
	if specs[0].KVEvents != nil {
		specs[0].KVEvents.Endpoint = "tcp://127.0.0.1:0"
	}
	fleet, err := sim.Start(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	se := fleet.Engine(e.ID)
	e.URL = se.URL()
	if e.KVEvents != nil {
		e.KVEvents.Endpoint = se.KVEndpoints()[0]
	}
	return e
}

// clone copies a plan deep enough that changing its engines leaves the original alone.
func clone(p *plan.Plan) *plan.Plan {
	c := *p
	c.Engines = slices.Clone(p.Engines)
	return &c
}

// metricValue reads one series from /metrics, and whether it is there.
func (fc *fleetCase) metricValue(t *testing.T, series string) (float64, bool) {
	t.Helper()
	for line := range strings.Lines(fc.metricsText(t)) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			_, _ = fmt.Sscan(rest, &v)
			return v, true
		}
	}
	return 0, false
}

// TestReloadKeepsStateOfEnginesThatStay: a reload that removes one engine, adds another
// and changes a per-plan setting keeps the staying engine's worker (health, in-flight,
// breaker), its load report and its KV index entries; the removed engine leaves with its
// metric series, and the added one takes traffic.
func TestReloadKeepsStateOfEnginesThatStay(t *testing.T) {
	p := reloadPlan(kvEngine("E1"), plainEngine("E2"))
	var next *plan.Plan
	fc := startFleetWith(t, p, 0, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	fc.warmKV(t)
	w1, breaker1 := fc.srv.reg.Get("E1"), fc.srv.reg.Get("E1").Breaker()
	wait.For(t, "E1's load report", func() bool { return fc.srv.table.LoadAt(w1, fc.srv.table.Now()) != nil })
	blocks := fc.srv.current().deps.KV.Blocks("E1")
	if blocks == 0 {
		t.Fatal("E1 holds no blocks in the index before the reload")
	}
	for range 4 {
		if status, _, body := fc.post(t, chat("m", "before the reload", `, "max_tokens": 2`)); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	if _, ok := fc.metricValue(t, `router_engine_inflight{engine="E2"}`); !ok {
		t.Fatal("no in-flight series for E2 before the reload")
	}

	next = clone(p)
	next.Engines = []plan.Engine{p.Engines[0], startSimEngine(t, p, plainEngine("E3"), 0)}
	next.Retries.MaxAttempts = 3
	next.Breaker = plan.Breaker{FailureThreshold: 1, OpenMS: 60_000}
	status, body := fc.postJSON(t, "/admin/reload", "")
	if status != http.StatusOK {
		t.Fatalf("reload: %d %s", status, body)
	}
	var res control.ReloadResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Generation != 2 || !slices.Equal(res.Kept, []string{"E1"}) || !slices.Equal(res.Removed, []string{"E2"}) || !slices.Equal(res.Added, []string{"E3"}) {
		t.Errorf("reload result %+v", res)
	}

	if fc.srv.reg.Get("E1") != w1 || w1.Breaker() != breaker1 {
		t.Error("E1's worker or breaker was replaced by a reload that keeps it")
	}
	if fc.srv.table.LoadAt(w1, fc.srv.table.Now()) == nil {
		t.Error("E1's load report was lost")
	}
	if n := fc.srv.current().deps.KV.Blocks("E1"); n < blocks {
		t.Errorf("E1 holds %d blocks after the reload, had %d", n, blocks)
	}
	if fc.srv.reg.Get("E2") != nil {
		t.Error("E2 is still in the registry")
	}
	if ids := fc.srv.fleet.subs.Engines(); !slices.Equal(ids, []string{"E1"}) {
		t.Errorf("KV-event subscriptions after the reload: %v, want E1's", ids)
	}
	if g := fc.srv.current(); g.plan.Retries.MaxAttempts != 3 || g.number != 2 {
		t.Errorf("the new plan is not current: max attempts %d, generation %d", g.plan.Retries.MaxAttempts, g.number)
	}
	before := fc.sentCountsOf(t, next)
	for range 4 {
		if status, _, body := fc.post(t, chat("m", "after the reload", `, "max_tokens": 2`)); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	after := fc.sentCountsOf(t, next)
	if after["E3"] == before["E3"] || after["E1"] == before["E1"] {
		t.Errorf("round robin after the reload: before %v after %v", before, after)
	}
	wait.For(t, "E2's series gone", func() bool {
		_, ok := fc.metricValue(t, `router_engine_inflight{engine="E2"}`)
		return !ok
	})
	if v, _ := fc.metricValue(t, `router_reloads_total{result="applied"}`); v != 1 {
		t.Errorf("router_reloads_total{result=\"applied\"} = %v", v)
	}
	st := fc.state(t)
	if d := st.Decisions[0]; d.Generation != 2 || st.Decisions[len(st.Decisions)-1].Generation != 1 {
		t.Errorf("decisions do not name the plans they ran on: newest %d, oldest %d", d.Generation, st.Decisions[len(st.Decisions)-1].Generation)
	}
	if st.Generation != 2 || st.engine("E3").Origin != control.OriginConfig || st.engine("E1").State != "serving" || st.engine("E2").ID != "" {
		t.Errorf("state after the reload: generation %d, engines %+v", st.Generation, st.Engines)
	}
	// The kept breaker follows the new settings: one failure opens it now (5 before).
	if b := w1.Breaker(); !b.Acquire() {
		t.Error("E1's breaker is not closed")
	} else if b.Failure(); b.State() != engine.BreakerOpen {
		t.Errorf("E1's breaker is %v after one failure, want open under the reloaded threshold of 1", b.State())
	}
}

// sentCountsOf is how many requests each engine of p has been sent so far.
func (fc *fleetCase) sentCountsOf(t *testing.T, p *plan.Plan) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, e := range p.Engines {
		out[e.ID] = len(fc.sent.bodies(e.URL))
	}
	return out
}

// TestStreamSpanningAReloadFinishes: a stream served by an engine that a reload removes
// runs to its end on the plan it started with; the engine is listed as leaving until then
// and forgotten after.
func TestStreamSpanningAReloadFinishes(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	var next *plan.Plan
	fc := startFleetWith(t, p, 1, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	next = clone(p)
	next.Engines = []plan.Engine{startSimEngine(t, p, plainEngine("E2"), 0)}

	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, fc.url+"/v1/chat/completions",
		strings.NewReader(chat("m", "a long story", `, "stream": true, "max_tokens": 400`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() {
		t.Fatal("no first chunk")
	}
	w1 := fc.srv.reg.Get("E1")
	if w1.Inflight() != 1 {
		t.Fatalf("E1 has %d requests in flight, want the stream", w1.Inflight())
	}
	if status, body := fc.postJSON(t, "/admin/reload", ""); status != 200 {
		t.Fatalf("reload: %d %s", status, body)
	}
	if st := fc.state(t); st.engine("E1").State != "leaving" {
		t.Errorf("E1 during its last stream: %+v", st.engine("E1"))
	}
	if status, _, body := fc.post(t, chat("m", "after", `, "max_tokens": 2`)); status != 200 || len(fc.sent.bodies(next.Engines[0].URL)) != 1 {
		t.Errorf("a new request after the reload: %d %s", status, body)
	}
	done := false
	for lines.Scan() {
		done = done || strings.Contains(lines.Text(), "[DONE]")
	}
	if !done || lines.Err() != nil {
		t.Fatalf("the stream spanning the reload did not finish: %v", lines.Err())
	}
	wait.For(t, "E1 forgotten", func() bool { return fc.state(t).engine("E1").ID == "" })
	if n := len(fc.sent.bodies(p.Engines[0].URL)); n != 1 {
		t.Errorf("E1 got %d requests, want only the stream", n)
	}
}

// TestBrokenReloadChangesNothing: a configuration that does not compile, or that changes
// a setting only a restart applies, is refused with its errors and the running plan stays.
func TestBrokenReloadChangesNothing(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	var next func() (*plan.Plan, error)
	fc := startFleetWith(t, p, 0, Options{Reload: func() (*plan.Plan, error) { return next() }})
	w1 := fc.srv.reg.Get("E1")

	next = func() (*plan.Plan, error) {
		return compiler.CompileSources([]compiler.Source{{Name: "router.yaml", Data: []byte("listen: 127.0.0.1:0\nengines: []\nmodels: {m: {buckets: [{id: all, rank: nope}]}}\n")}})
	}
	status, body := fc.postJSON(t, "/admin/reload", "")
	var answer struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		Errors []string `json:"errors"`
	}
	_ = json.Unmarshal(body, &answer)
	if status != http.StatusUnprocessableEntity || answer.Error.Code != "reload_refused" || len(answer.Errors) == 0 || !strings.Contains(string(body), "router.yaml:3") {
		t.Fatalf("broken config: %d %s", status, body)
	}

	moved := clone(p)
	moved.Listen = "127.0.0.1:9"
	next = func() (*plan.Plan, error) { return moved, nil }
	status, body = fc.postJSON(t, "/admin/reload", "")
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "listen (running 127.0.0.1:0, config 127.0.0.1:9)") || !strings.Contains(string(body), "only a restart applies") {
		t.Fatalf("restart-only change: %d %s", status, body)
	}

	if g := fc.srv.current(); g.number != 1 || fc.srv.reg.Get("E1") != w1 {
		t.Errorf("a refused reload changed the router: generation %d", g.number)
	}
	if status, _, body := fc.post(t, chat("m", "still served", `, "max_tokens": 2`)); status != 200 {
		t.Errorf("after refused reloads: %d %s", status, body)
	}
	if v, _ := fc.metricValue(t, `router_reloads_total{result="refused"}`); v != 2 {
		t.Errorf("router_reloads_total{result=\"refused\"} = %v, want 2", v)
	}
	var re *control.ReloadError
	if _, err := fc.srv.ReloadConfig(); !errors.As(err, &re) {
		t.Errorf("ReloadConfig error %v, want a *control.ReloadError", err)
	}
}

// adminCall sends an admin request and returns the status and body.
func (fc *fleetCase) adminCall(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, fc.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}

// takesHalf sends four chat requests and checks that the engine at url, added beside
// one other under round robin, got two of them.
func (fc *fleetCase) takesHalf(t *testing.T, url string) {
	t.Helper()
	for range 4 {
		if status, _, body := fc.post(t, chat("m", "spread me", `, "max_tokens": 2`)); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	if n := len(fc.sent.bodies(url)); n != 2 {
		t.Fatalf("round robin over two engines sent the added one %d of 4 requests", n)
	}
}

func compileEngine(running *plan.Plan, data []byte) (plan.Engine, error) {
	return compiler.CompileEngine(running, compiler.Source{Name: "engine.json", Data: data})
}

// TestAdminAddDrainRemove: an engine added through the admin API takes traffic; drained,
// it gets none while its stream finishes; removed, it is forgotten. Bad requests get
// clear 4xx answers and change nothing.
func TestAdminAddDrainRemove(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	fc := startFleetWith(t, p, 1, Options{CompileEngine: compileEngine})
	e2 := startSimEngine(t, p, plainEngine("E2"), 1)

	status, body := fc.adminCall(t, http.MethodPost, "/admin/engines", fmt.Sprintf(`{"id": "E2", "url": %q, "model": "m", "role": "plain"}`, e2.URL))
	if status != http.StatusCreated {
		t.Fatalf("add: %d %s", status, body)
	}
	fc.takesHalf(t, e2.URL)
	if st := fc.state(t); st.engine("E2").Origin != control.OriginAdmin || st.engine("E2").State != "serving" || st.Generation != 2 {
		t.Errorf("state after add: %+v", st.engine("E2"))
	}

	for name, tc := range map[string]struct {
		method, path, body string
		status             int
		want               string
	}{
		"duplicate id":   {http.MethodPost, "/admin/engines", `{"id": "E2", "url": "http://127.0.0.1:1", "model": "m", "role": "plain"}`, 400, `duplicate engine id \"E2\"`},
		"unknown model":  {http.MethodPost, "/admin/engines", `{"id": "E9", "url": "http://127.0.0.1:1", "model": "n", "role": "plain"}`, 400, `serves model \"n\"`},
		"not json":       {http.MethodPost, "/admin/engines", `id: E9`, 400, "engine refused"},
		"drain unknown":  {http.MethodPost, "/admin/engines/E9/drain", "", 404, `no engine \"E9\" is a member (members: E1, E2)`},
		"remove unknown": {http.MethodDelete, "/admin/engines/E9", "", 404, "see GET /admin/state"},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := fc.adminCall(t, tc.method, tc.path, tc.body)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s, want %d containing %q", status, body, tc.status, tc.want)
			}
		})
	}

	// A stream on E2, then E2 drains: no new picks, the stream finishes.
	var stream *bufio.Scanner
	for stream == nil {
		req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, fc.url+"/v1/chat/completions",
			strings.NewReader(chat("m", "a long story", `, "stream": true, "max_tokens": 400`)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		s := bufio.NewScanner(resp.Body)
		s.Scan()
		if fc.srv.reg.Get("E2").Inflight() == 1 {
			stream = s
		}
	}
	if status, body := fc.adminCall(t, http.MethodPost, "/admin/engines/E2/drain", ""); status != 200 || !strings.Contains(body, `"inflight": 1`) {
		t.Fatalf("drain: %d %s", status, body)
	}
	if st := fc.state(t); st.engine("E2").State != "draining" {
		t.Errorf("E2 after drain: %+v", st.engine("E2"))
	}
	sent := len(fc.sent.bodies(e2.URL))
	for range 4 {
		if status, _, body := fc.post(t, chat("m", "not to E2", `, "max_tokens": 2`)); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	if n := len(fc.sent.bodies(e2.URL)); n != sent {
		t.Errorf("a draining engine got %d new requests", n-sent)
	}
	done := false
	for stream.Scan() {
		done = done || strings.Contains(stream.Text(), "[DONE]")
	}
	if !done {
		t.Fatal("the draining engine's stream did not finish")
	}

	if status, body := fc.adminCall(t, http.MethodDelete, "/admin/engines/E2", ""); status != 200 {
		t.Fatalf("remove: %d %s", status, body)
	}
	wait.For(t, "E2 forgotten", func() bool {
		_, series := fc.metricValue(t, `router_engine_inflight{engine="E2"}`)
		return fc.state(t).engine("E2").ID == "" && !series
	})
	if fc.srv.table.Len() != 1 {
		t.Errorf("the load table holds %d engines after the removal, want 1", fc.srv.table.Len())
	}
	if v, _ := fc.metricValue(t, `router_engine_membership_changes_total{change="added",origin="admin"}`); v != 1 {
		t.Errorf("added by admin: %v", v)
	}
	if v, _ := fc.metricValue(t, `router_engines{origin="config",state="serving"}`); v != 1 {
		t.Errorf("serving config engines: %v", v)
	}
}

// TestRuntimeEnginesSurviveAReload: an engine added at run time stays through a reload of
// a config that does not name it, and is replaced by the config's when it does.
func TestRuntimeEnginesSurviveAReload(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	var next *plan.Plan
	fc := startFleetWith(t, p, 0, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	e2 := startSimEngine(t, p, plainEngine("E2"), 0)
	if err := fc.srv.Membership(control.OriginDNS).Add(e2); err != nil {
		t.Fatal(err)
	}
	w2 := fc.srv.reg.Get("E2")
	next = clone(p)
	if _, err := fc.srv.ReloadConfig(); err != nil {
		t.Fatal(err)
	}
	if fc.srv.reg.Get("E2") != w2 || fc.state(t).engine("E2").Origin != control.OriginDNS {
		t.Error("a run-time engine did not survive a reload of a config without it")
	}
	next = clone(p)
	next.Engines = append(next.Engines, e2)
	res, err := fc.srv.ReloadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if st := fc.state(t); st.engine("E2").Origin != control.OriginConfig || fc.srv.reg.Get("E2") != w2 || !slices.Contains(res.Kept, "E2") {
		t.Errorf("the config naming a run-time engine takes it over, same identity kept: %+v %+v", st.engine("E2"), res)
	}
	fc.srv.fleet.maxMembers = 2
	var me *control.MembershipError
	if err := fc.srv.Membership(control.OriginDNS).Add(startSimEngine(t, p, plainEngine("E4"), 0)); !errors.As(err, &me) || me.Status != 409 || !strings.Contains(me.Msg, "the router has 2 engines, its maximum: remove engines first") {
		t.Errorf("adding a third engine to a router of at most two: %v", err)
	}
	e3 := plainEngine("E3")
	e3.URL = fc.srv.reg.Get("E1").URL() + "/"
	if err := fc.srv.Membership(control.OriginDNS).Add(e3); !errors.As(err, &me) || me.Status != 409 || !strings.Contains(me.Msg, `same url as member "E1"`) {
		t.Errorf("adding a second engine at E1's url: %v", err)
	}
}

// TestReloadReplacesAChangedEngine: an engine whose identity changed (here its url) is a
// new engine: a fresh worker and breaker, traffic to the new url, none to the old.
func TestReloadReplacesAChangedEngine(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	var next *plan.Plan
	fc := startFleetWith(t, p, 0, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	w1 := fc.srv.reg.Get("E1")
	next = clone(p)
	next.Engines = []plan.Engine{startSimEngine(t, p, plainEngine("E1"), 0)}
	res, err := fc.srv.ReloadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Replaced, []string{"E1"}) || len(res.Added)+len(res.Removed) != 0 {
		t.Errorf("reload result %+v", res)
	}
	if w := fc.srv.reg.Get("E1"); w == w1 || w.Breaker() == w1.Breaker() || w.URL() != next.Engines[0].URL {
		t.Error("the changed engine kept its old worker")
	}
	if status, _, body := fc.post(t, chat("m", "to the new E1", `, "max_tokens": 2`)); status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if len(fc.sent.bodies(next.Engines[0].URL)) != 1 || len(fc.sent.bodies(p.Engines[0].URL)) != 0 {
		t.Error("the request did not go to the new url")
	}
	if _, ok := fc.metricValue(t, `router_engine_inflight{engine="E1"}`); !ok {
		t.Error("the replaced engine has no in-flight series")
	}
}

// TestReloadDropsARemovedEnginesIndex: a KV-event engine that a reload removes loses its
// index entries and its KV series at once, and its subscription stops.
func TestReloadDropsARemovedEnginesIndex(t *testing.T) {
	p := reloadPlan(kvEngine("E1"), plainEngine("E2"))
	var next *plan.Plan
	fc := startFleetWith(t, p, 0, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	fc.warmKV(t)
	if _, ok := fc.metricValue(t, `router_kv_blocks{engine="E1"}`); !ok {
		t.Fatal("no KV series for E1 before the reload")
	}
	next = clone(p)
	next.Engines = next.Engines[1:]
	if _, err := fc.srv.ReloadConfig(); err != nil {
		t.Fatal(err)
	}
	if n := fc.srv.current().deps.KV.Blocks("E1"); n != 0 {
		t.Errorf("the removed engine holds %d blocks", n)
	}
	if _, ok := fc.metricValue(t, `router_kv_blocks{engine="E1"}`); ok {
		t.Error("the removed engine's KV series is still exported")
	}
	if ids := fc.srv.fleet.subs.Engines(); len(ids) != 0 {
		t.Errorf("KV-event subscriptions after the reload: %v, want none", ids)
	}
}

// TestEngineChurnKeepsStateBounded: an engine added, picked and removed again and again
// leaves /metrics, the load table and the fleet as they were.
func TestEngineChurnKeepsStateBounded(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	fc := startFleet(t, p)
	e2 := startSimEngine(t, p, plainEngine("E2"), 0)
	series := func() int { return strings.Count(fc.metricsText(t), "\nrouter_") }
	before := series()
	for i := range 20 {
		e := e2
		e.ID = fmt.Sprintf("churn-%d", i)
		if err := fc.srv.Membership(control.OriginDNS).Add(e); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if status, _, body := fc.post(t, chat("m", "churn", `, "max_tokens": 1`)); status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
		}
		if err := fc.srv.Membership(control.OriginDNS).Remove(e.ID); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the churned engines forgotten", func() bool { return len(fc.srv.memberList()) == 1 })
	if after := series(); after != before {
		t.Errorf("/metrics has %d router series after 20 engines came and went, had %d", after, before)
	}
	if n := fc.srv.table.Slots(); n != 2 {
		t.Errorf("the load table has %d slots, want 2 (E1 and one reused)", n)
	}
	if v, _ := fc.metricValue(t, `router_engine_membership_changes_total{change="removed",origin="dns"}`); v != 20 {
		t.Errorf("removed by dns: %v", v)
	}
}

// TestSettleAfterLoading checks that Options.Settle runs once New has loaded the models
// and again after each applied reload, and not after a refused one (nothing was loaded
// that stays).
func TestSettleAfterLoading(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	var settled atomic.Int32
	var next *plan.Plan
	fc := startFleetWith(t, p, 0, Options{Settle: func() { settled.Add(1) }, Reload: func() (*plan.Plan, error) { return next, nil }})
	if n := settled.Load(); n != 1 {
		t.Fatalf("settled %d times after New, want 1", n)
	}
	next = clone(p)
	next.Retries.MaxAttempts = 3
	if _, err := fc.srv.ReloadConfig(); err != nil {
		t.Fatal(err)
	}
	if n := settled.Load(); n != 2 {
		t.Fatalf("settled %d times after an applied reload, want 2", n)
	}
	next = clone(p)
	next.Listen = "127.0.0.1:9" // only a restart applies it: refused
	if _, err := fc.srv.ReloadConfig(); err == nil {
		t.Fatal("a changed listen address reloaded")
	}
	if n := settled.Load(); n != 2 {
		t.Fatalf("settled %d times after a refused reload, want 2", n)
	}
}
