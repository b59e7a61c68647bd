package server

import (
	"encoding/json"

	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

func TestShutdownDrains(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	// Slow enough (about a second) that the request is surely in flight when shutdown starts.
	_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{Slowdown: 500})
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(fc.url+"/v1/chat/completions", "application/json", strings.NewReader(chat("m", "finish me", `, "max_tokens": 8`)))
		if err != nil {
			done <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	wait.For(t, "request in flight", func() bool { return fc.srv.reg.Get("E1").Inflight() == 1 })
	fc.stop()
	if status := <-done; status != 200 {
		t.Errorf("in-flight request during shutdown: status %d, want 200", status)
	}
	if err := <-fc.served; err != nil {
		t.Errorf("serve after drain: %v", err)
	}
	fc.served <- nil // for the cleanup
	if _, err := http.Get(fc.url + "/healthz"); err == nil {
		t.Error("a drained router must not accept new connections")
	}
}

func TestAdminTokenAndExplain(t *testing.T) {
	p := fallPlan()
	p.AdminToken = "s3cret"
	fc := startFleet(t, p)
	req, _ := http.NewRequest(http.MethodGet, fc.url+"/admin/state", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("X-Router-Error-Code") != answer.CodeUnauthorized {
		t.Errorf("without token: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, fc.url+"/admin/explain", strings.NewReader(chat("m", "explain me", `, "max_tokens": 3`)))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ex explain.Explanation
	if err := json.NewDecoder(resp.Body).Decode(&ex); err != nil {
		t.Fatal(err)
	}
	if ex.Bucket == nil || *ex.Bucket != "short" || ex.Picks[plan.RolePlain] != "E1" || len(ex.Attempts) != 1 {
		t.Errorf("explain: %+v", ex)
	}
	if n := len(fc.sent.bodies(p.Engines[0].URL)); n != 0 {
		t.Errorf("explain must not dispatch, E1 got %d requests", n)
	}
}

// snapshot is a decoded /admin/state with lookups by bucket and engine.
type snapshot struct{ control.State }

func (fc *fleetCase) state(t *testing.T) *snapshot {
	t.Helper()
	resp, err := http.Get(fc.url + "/admin/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st snapshot
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func (s *snapshot) bucket(model, id string) control.BucketState {
	for _, b := range s.Buckets {
		if b.Model == model && b.ID == id {
			return b
		}
	}
	return control.BucketState{}
}

func (s *snapshot) engine(id string) control.EngineState {
	for _, e := range s.Engines {
		if e.ID == id {
			return e
		}
	}
	return control.EngineState{}
}

// TestExplainFactsTakeTheOnlyModel: explain facts without a model are the only model's on
// a one-model router, and refused as an unknown model on a router with several.
func TestExplainFactsTakeTheOnlyModel(t *testing.T) {
	fc := startFleet(t, plainPlan("E1"))
	status, body := fc.postJSON(t, "/admin/explain", `{"input_tokens": 5}`)
	var ex explain.Explanation
	if err := json.Unmarshal(body, &ex); err != nil || status != http.StatusOK || ex.Picks[plan.RolePlain] != "E1" {
		t.Errorf("one model: %d %s", status, body)
	}
	fc = startFleet(t, fallPlan())
	if status, body := fc.postJSON(t, "/admin/explain", `{"input_tokens": 5}`); status != http.StatusNotFound {
		t.Errorf("several models: %d %s, want 404", status, body)
	}
}

// The state snapshot names each engine's groups from the plan (a group with worker_ids
// takes those engines only; an empty list takes none), carries its load report with the
// report's age, and lists the queue's waiting requests for every served model.
func TestStateGroupsLoadAndQueue(t *testing.T) {
	p := fallPlan()
	fc := startFleet(t, p)
	var st *snapshot
	wait.For(t, "E1's load report", func() bool { st = fc.state(t); return st.engine("E1").Load != nil })
	want := map[string][]string{"E1": {"short/plain"}, "E2": {"long/plain"}, "E3": {"t/plain"}, "E4": nil}
	for id, groups := range want {
		if got := st.engine(id).Groups; !slices.Equal(got, groups) {
			t.Errorf("%s groups %q, want %q", id, got, groups)
		}
	}
	if e := st.engine("E1"); e.ReportAgeMS < 0 || e.Breaker != "closed" || !e.Healthy {
		t.Errorf("E1 with a load report: age %v ms, breaker %q, healthy %v", e.ReportAgeMS, e.Breaker, e.Healthy)
	}
	q := st.Queue
	if q == nil || len(q.Waiting) != 3 || q.Waiting["m"] != 0 || q.MaxConcurrent != p.Limits.MaxConcurrentRequests || q.Running != 0 {
		t.Errorf("queue: %+v", q)
	}
	if st.Generation != 1 || len(st.Buckets) != 4 || st.bucket("tiny", "t").ByStatus == nil {
		t.Errorf("generation %d, buckets %+v", st.Generation, st.Buckets)
	}
}
