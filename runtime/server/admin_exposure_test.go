package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/plan"
)

// TestAdminWritesNeedATokenBeyondLoopback: a router listening on every interface with no
// admin_token refuses every admin write and explain with a 403 naming the fix, changes
// nothing, still answers GET /admin/state, and warns at start; with admin_token set, the
// same listener takes the write from a client that has the token. (A loopback-only
// listener without a token accepts writes: TestAdminAddDrainRemove.)
func TestAdminWritesNeedATokenBeyondLoopback(t *testing.T) {
	p := reloadPlan(plainEngine("E1"))
	fleet := startSims(t, p, 0)
	p.Engines[0].URL = fleet.Engine("E1").URL()
	var logs lockedBuffer
	opts := Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), CompileEngine: compileEngine,
		Reload: func() (*plan.Plan, error) { return p, nil }}
	fc := serveListening(t, "0.0.0.0:0", p, opts, nil)

	added := `{"id": "E9", "url": "http://127.0.0.1:1", "model": "m", "role": "plain"}`
	for _, call := range []struct{ method, path, body string }{
		{http.MethodPost, "/admin/engines", added},
		{http.MethodPost, "/admin/engines/E1/drain", ""},
		{http.MethodDelete, "/admin/engines/E1", ""},
		{http.MethodPost, "/admin/reload", ""},
		{http.MethodPost, "/admin/explain", chat("m", "explain me", "")},
	} {
		status, code, body := fc.call(t, call.method, call.path, call.body)
		if status != http.StatusForbidden || code != answer.CodeForbidden ||
			!strings.Contains(body, "set admin_token in the config") || !strings.Contains(body, `"type"`) {
			t.Errorf("%s %s without a token beyond loopback: %d %s %s", call.method, call.path, status, code, body)
		}
	}
	if status, _, body := fc.call(t, http.MethodHead, "/admin/state", ""); status != http.StatusOK {
		t.Errorf("HEAD /admin/state without a token: %d %s", status, body)
	}
	st := fc.state(t)
	if len(st.Engines) != 1 || st.engine("E1").State != "serving" || st.Generation != 1 {
		t.Errorf("refused writes changed the fleet: %+v", st)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"admin writes refused") {
		t.Errorf("no start-up warning in the log:\n%s", logs.String())
	}

	tokened := reloadPlan(plainEngine("E1"))
	tokened.Engines[0].URL = p.Engines[0].URL
	tokened.AdminToken = "s3cret"
	logs.Reset()
	fc = serveListening(t, "0.0.0.0:0", tokened, opts, nil)
	if status, _, body := fc.call(t, http.MethodPost, "/admin/engines", added, "Authorization", "Bearer s3cret"); status != http.StatusCreated {
		t.Errorf("add with the token: %d %s", status, body)
	}
	if strings.Contains(logs.String(), "admin writes refused") {
		t.Errorf("warned although admin_token is set:\n%s", logs.String())
	}
}

// lockedBuffer is a log destination safe for the router's goroutines and the test's.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// TestEngineURLCredentialsNeverShow: an engine URL's password is redacted in
// /admin/state (the URL and a health error that quotes it), in the admin API's errors, in
// the log and in /metrics.
func TestEngineURLCredentialsNeverShow(t *testing.T) {
	const secret = "engine-pw"
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(sick.Close)
	p := reloadPlan(plainEngine("E1"), plainEngine("E2"))
	fleet := startSims(t, &plan.Plan{Engines: p.Engines[:1], Models: p.Models}, 0)
	withCreds := func(u string) string { return strings.Replace(u, "http://", "http://ops:"+secret+"@", 1) }
	p.Engines[0].URL = withCreds(fleet.Engine("E1").URL())
	p.Engines[1].URL = withCreds(sick.URL)
	var logs lockedBuffer
	fc := serveListening(t, "127.0.0.1:0", p, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), CompileEngine: compileEngine}, nil)

	var seen strings.Builder
	added := fmt.Sprintf(`{"id": "E3", "url": %q, "model": "m", "role": "plain"}`, withCreds(fleet.Engine("E1").URL()+"/e3"))
	for _, call := range []struct {
		body   string
		status int
		shows  string
	}{
		{added, http.StatusCreated, `"url": "http://ops:xxxxx@`},
		{added, http.StatusBadRequest, "also used for http://ops:xxxxx@"},
		{`{"id": "E4", "url": "http://ops:` + secret + `@[::1", "model": "m", "role": "plain"}`, http.StatusBadRequest, `url \"http://(unparsable, redacted)\"`},
	} {
		status, _, body := fc.call(t, http.MethodPost, "/admin/engines", call.body)
		if status != call.status || !strings.Contains(body, call.shows) {
			t.Errorf("POST /admin/engines: %d %s, want %d showing %s", status, body, call.status, call.shows)
		}
		seen.WriteString(body)
	}
	var st *snapshot
	wait.For(t, "E2's health error", func() bool { st = fc.state(t); return st.engine("E2").HealthError != "" })
	if got, want := st.engine("E1").URL, "http://ops:xxxxx@"+strings.TrimPrefix(fleet.Engine("E1").URL(), "http://"); got != want {
		t.Errorf("state url %q, want %q", got, want)
	}
	if !strings.Contains(st.engine("E2").HealthError, "ops:xxxxx@") {
		t.Errorf("E2's health error does not quote its url redacted: %q", st.engine("E2").HealthError)
	}
	for _, path := range []string{"/admin/state", "/metrics"} {
		resp, err := http.Get(fc.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen.Write(b)
	}
	if !strings.Contains(logs.String(), "engine added") {
		t.Fatalf("no log line for the added engine:\n%s", logs.String())
	}
	seen.WriteString(logs.String())
	if strings.Contains(seen.String(), secret) {
		t.Errorf("the engine's password shows in state, metrics, errors or logs:\n%s", seen.String())
	}
}

// TestServerInfoHidesEngineAddresses: /get_server_info relays what an SGLang client reads
// (the model, its limits, parallelism, version) and none of the engine's addresses: its
// host and port, its KV-event publisher's endpoint and topic (kv_events_config), its PD
// bootstrap port. SGLang answers its whole ServerArgs plus scheduler info, internal states
// and version: sgl-project/sglang python/sglang/srt/entrypoints/http_server.py
// (get_server_info) at 9c0549b727fe222444495cea6b369697534d60f0; the simulator answers
// the same shape (runtime/sim/info.go).
func TestServerInfoHidesEngineAddresses(t *testing.T) {
	fc := startFleet(t, reloadPlan(kvEngine("E1")))
	direct, err := http.Get(fc.fleet.Engine("E1").URL() + "/get_server_info")
	if err != nil {
		t.Fatal(err)
	}
	var engine map[string]any
	if err := json.NewDecoder(direct.Body).Decode(&engine); err != nil {
		t.Fatal(err)
	}
	direct.Body.Close()
	if _, ok := engine["kv_events_config"]; !ok {
		t.Fatalf("the engine's own answer has no kv_events_config to hide: %v", engine)
	}
	status, body := fc.get(t, "/get_server_info")
	var relayed map[string]any
	if err := json.Unmarshal(body, &relayed); status != http.StatusOK || err != nil {
		t.Fatalf("GET /get_server_info: %d %s (%v)", status, body, err)
	}
	for _, key := range []string{"kv_events_config", "kv_events", "disaggregation_bootstrap_port"} {
		if _, ok := relayed[key]; ok {
			t.Errorf("relayed %s: %v", key, relayed[key])
		}
	}
	for _, key := range []string{"model_path", "max_total_num_tokens", "context_length", "dp_size", "version"} {
		if relayed[key] != engine[key] || relayed[key] == nil {
			t.Errorf("%s: relayed %v, the engine says %v", key, relayed[key], engine[key])
		}
	}
	for _, leak := range []string{fc.fleet.Engine("E1").KVTopic(), fc.fleet.Engine("E1").KVEndpoints()[0]} {
		if strings.Contains(string(body), leak) {
			t.Errorf("the relayed answer names %q: %s", leak, body)
		}
	}
}

func TestInternalInfoFields(t *testing.T) {
	for key, internal := range map[string]bool{
		"host": true, "port": true, "kv_events_config": true, "dist_init_addr": true, "api_key": true,
		"disaggregation_bootstrap_port": true, "pdlb_url": true, "disaggregation_ib_device": true,
		"hicache_storage_backend_extra_config": true, "admin_api_key": true,
		"model_path": false, "max_total_num_tokens": false, "internal_states": false, "version": false,
		"context_length": false, "tp_size": false, "served_model_name": false, "disaggregation_mode": false,
	} {
		if got := internalInfo(key); got != internal {
			t.Errorf("internalInfo(%q) = %v, want %v", key, got, internal)
		}
	}
}

func (fc *fleetCase) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(fc.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
