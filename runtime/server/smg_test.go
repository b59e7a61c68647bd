package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

// Tests of SGLang's model gateway (SMG) operator endpoints (control.SMGRoutes). The shapes
// are SMG's at lightseekorg/smg: routes in model_gateway/src/server.rs (commit 0061eead),
// /workers in model_gateway/src/worker/service.rs (16b80e68), /flush_cache and /get_loads
// in crates/protocols/src/worker.rs (da9d8b9c) and model_gateway/src/worker/manager.rs
// (0b2b77f9).

// smgWorkers is SMG's ListWorkersResult.
type smgWorkers struct {
	Workers []struct {
		ID         string `json:"id"`
		URL        string `json:"url"`
		ModelID    string `json:"model_id"`
		WorkerType string `json:"worker_type"`
		IsHealthy  bool   `json:"is_healthy"`
		State      string `json:"state"`
		Origin     string `json:"origin"`
	} `json:"workers"`
	Total int            `json:"total"`
	Stats map[string]int `json:"stats"`
}

func (fc *fleetCase) smgWorkers(t *testing.T) smgWorkers {
	t.Helper()
	status, body := fc.adminCall(t, http.MethodGet, "/workers", "")
	var ws smgWorkers
	if err := json.Unmarshal([]byte(body), &ws); status != http.StatusOK || err != nil {
		t.Fatalf("GET /workers: %d %v %s", status, err, body)
	}
	return ws
}

// TestSMGWorkers: /workers lists, adds (an SMG worker spec) and removes (by id or url)
// engines through the admin API's membership; an added engine takes traffic.
func TestSMGWorkers(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	fc := startFleetWith(t, p, 1, Options{CompileEngine: compileEngine})
	e2 := startSimEngine(t, p, plainEngine("E2"), 1)

	ws := fc.smgWorkers(t)
	if ws.Total != 1 || ws.Workers[0].ID != "E1" || ws.Workers[0].WorkerType != "regular" || ws.Workers[0].ModelID != "m" ||
		ws.Workers[0].URL != p.Engines[0].URL || ws.Stats["regular_count"] != 1 || ws.Stats["prefill_count"] != 0 {
		t.Fatalf("GET /workers: %+v", ws)
	}
	wait.For(t, "E1 healthy", func() bool { return fc.smgWorkers(t).Workers[0].IsHealthy })

	// SMG's spec: a url and a type; the router serves one model, which the engine joins.
	status, body := fc.adminCall(t, http.MethodPost, "/workers", fmt.Sprintf(`{"url": %q, "worker_type": "regular", "priority": 50}`, e2.URL))
	id := strings.TrimPrefix(e2.URL, "http://")
	var added struct {
		Status   string `json:"status"`
		WorkerID string `json:"worker_id"`
		Location string `json:"location"`
	}
	if err := json.Unmarshal([]byte(body), &added); status != http.StatusAccepted || err != nil ||
		added.Status != "accepted" || added.WorkerID != id || added.Location != "/workers/"+url.PathEscape(id) {
		t.Fatalf("POST /workers: %d %s", status, body)
	}
	fc.takesHalf(t, e2.URL)
	if status, body := fc.adminCall(t, http.MethodGet, "/workers/"+url.PathEscape(id), ""); status != http.StatusOK || !strings.Contains(body, `"origin": "admin"`) {
		t.Fatalf("GET /workers/%s: %d %s", id, status, body)
	}
	if ws := fc.smgWorkers(t); ws.Total != 2 || ws.Stats["regular_count"] != 2 {
		t.Fatalf("GET /workers after the add: %+v", ws)
	}

	for name, tc := range map[string]struct {
		body string
		want string
	}{
		"same url":     {fmt.Sprintf(`{"url": %q, "id": "E3"}`, e2.URL), "has the same url as engine"},
		"api key":      {`{"url": "http://127.0.0.1:1", "api_key": "k"}`, "sends engines no API key"},
		"grpc":         {`{"url": "http://127.0.0.1:1", "connection_mode": "grpc"}`, "over HTTP only"},
		"bad type":     {`{"url": "http://127.0.0.1:1", "worker_type": "mixed"}`, "use regular, prefill or decode"},
		"other model":  {`{"url": "http://127.0.0.1:1", "models": [{"id": "n"}]}`, `serves model \"n\"`},
		"no url":       {`{"worker_type": "regular"}`, "send the engine's absolute URL"},
		"not json":     {`url: x`, "reading the worker"},
		"prefill role": {`{"url": "http://127.0.0.1:1", "worker_type": "prefill"}`, "mixes plain engines"},
	} {
		if status, body := fc.adminCall(t, http.MethodPost, "/workers", tc.body); status/100 != 4 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want a 4xx saying %q", name, status, body, tc.want)
		}
	}

	// SMG's earlier API names a worker by its url, its current one by id.
	status, body = fc.adminCall(t, http.MethodDelete, "/workers/"+url.PathEscape(e2.URL), "")
	if status != http.StatusAccepted || !strings.Contains(body, `"worker_id": "`+id+`"`) {
		t.Fatalf("DELETE /workers/{url}: %d %s", status, body)
	}
	if ws := fc.smgWorkers(t); ws.Total != 1 || ws.Workers[0].ID != "E1" {
		t.Fatalf("GET /workers after the removal: %+v", ws)
	}
	if status, body := fc.adminCall(t, http.MethodDelete, "/workers/E9", ""); status != http.StatusNotFound || !strings.Contains(body, "members: E1") {
		t.Fatalf("DELETE /workers/E9: %d %s", status, body)
	}
	if status, body := fc.adminCall(t, http.MethodDelete, "/workers/E1", ""); status != http.StatusAccepted {
		t.Fatalf("DELETE /workers/E1: %d %s", status, body)
	}
	if ws := fc.smgWorkers(t); ws.Total != 0 {
		t.Fatalf("GET /workers after removing every engine: %+v", ws)
	}
}

// TestSMGFlushCache: POST /flush_cache reaches every engine at its kind's endpoint
// (SGLang's /flush_cache, vLLM's /reset_prefix_cache: the simulator serves each only for
// its kind) and reports each engine's result, 206 when one failed.
func TestSMGFlushCache(t *testing.T) {
	vllm := plainEngine("V1")
	vllm.Kind, vllm.Load = plan.KindVLLM, plan.LoadSource{Source: "metrics", IntervalMS: 20, StaleAfterMS: 2000}
	p := reloadPlan(plainEngine("E1"), vllm)
	p.Engines[0].Kind = plan.KindSGLang
	fc := startFleetWith(t, p, 1, Options{CompileEngine: compileEngine})

	status, body := fc.adminCall(t, http.MethodPost, "/flush_cache", "")
	if status != http.StatusOK || !strings.Contains(body, `"status": "success"`) || !strings.Contains(body, `"workers_flushed": 2`) {
		t.Fatalf("POST /flush_cache: %d %s", status, body)
	}

	// An engine that does not answer fails alone.
	if status, body := fc.adminCall(t, http.MethodPost, "/admin/engines", `{"id": "dead", "url": "http://127.0.0.1:1", "model": "m", "role": "plain"}`); status != http.StatusCreated {
		t.Fatalf("add: %d %s", status, body)
	}
	status, body = fc.adminCall(t, http.MethodPost, "/flush_cache", "")
	var res struct {
		Status         string
		WorkersFlushed int `json:"workers_flushed"`
		Successful     []string
		Failed         []struct{ Worker, Error string }
	}
	if err := json.Unmarshal([]byte(body), &res); status != http.StatusPartialContent || err != nil || res.Status != "partial_success" ||
		res.WorkersFlushed != 2 || len(res.Successful) != 2 || len(res.Failed) != 1 || res.Failed[0].Worker != "http://127.0.0.1:1" ||
		!strings.Contains(res.Failed[0].Error, "refused") {
		t.Fatalf("POST /flush_cache with a dead engine: %d %s", status, body)
	}
}

// TestSMGHealthAndLoads: /liveness, /readiness and /health_generate are open; the probe
// runs a real chat request through the router; /get_loads reports the polled loads.
func TestSMGHealthAndLoads(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	fc := startFleetWith(t, p, 1, Options{CompileEngine: compileEngine})
	for _, path := range []string{"/liveness", "/readiness", "/health_generate"} {
		if status, _, body := fc.call(t, http.MethodGet, path, ""); status != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
	before := len(fc.sent.bodies(p.Engines[0].URL))
	status, _, body := fc.call(t, http.MethodGet, "/health_generate", "")
	if status != http.StatusOK || !strings.HasPrefix(body, "OK - 1 engines healthy") || len(fc.sent.bodies(p.Engines[0].URL)) != before+1 {
		t.Fatalf("GET /health_generate: %d %s (the engine got %d requests)", status, body, len(fc.sent.bodies(p.Engines[0].URL))-before)
	}

	wait.For(t, "a load report", func() bool {
		_, body := fc.adminCall(t, http.MethodGet, "/get_loads", "")
		return strings.Contains(body, `"load": 0`)
	})
	_, body = fc.adminCall(t, http.MethodGet, "/get_loads", "")
	var loads struct{ Workers []map[string]any }
	if err := json.Unmarshal([]byte(body), &loads); err != nil || len(loads.Workers) != 1 || loads.Workers[0]["worker"] != p.Engines[0].URL {
		t.Fatalf("GET /get_loads: %s", body)
	}

	// Without a healthy engine the probe is not sent and the answer names the engines.
	if status, body := fc.adminCall(t, http.MethodPost, "/admin/engines/E1/drain", ""); status != http.StatusOK {
		t.Fatalf("drain: %d %s", status, body)
	}
	if status, _, body := fc.call(t, http.MethodGet, "/health_generate", ""); status != http.StatusServiceUnavailable || !strings.Contains(body, "0/1 engines healthy: E1") {
		t.Fatalf("GET /health_generate with E1 drained: %d %s", status, body)
	}
}

// TestSMGAliases: SMG's /v1/classify and /rerank serve the router's /classify and
// /v1/rerank, sending the engine the router's path; the engine endpoints need the admin
// token when one is set.
func TestSMGAliases(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	p.AdminToken = "t0ken"
	fc := startFleetWith(t, p, 1, Options{CompileEngine: compileEngine})
	for path, body := range map[string]string{
		"/v1/classify": `{"model": "m", "text": "good"}`,
		"/rerank":      `{"model": "m", "query": "q", "documents": ["a", "b"]}`,
	} {
		if status, _, got := fc.call(t, http.MethodPost, path, body); status != http.StatusOK {
			t.Errorf("POST %s: %d %s", path, status, got)
		}
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/workers"}, {http.MethodPost, "/workers"}, {http.MethodDelete, "/workers/E1"},
		{http.MethodGet, "/get_loads"}, {http.MethodPost, "/flush_cache"},
	} {
		if status, _, body := fc.call(t, c.method, c.path, "{}"); status != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d %s", c.method, c.path, status, body)
		}
	}
}
