package server

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/otlptest"
	"github.com/routerkit/router/runtime/plan"
)

// stopServing stops the router as SIGINT does and waits for Serve to return, which
// flushes the spans; the test's cleanup still sees Serve's result.
func (fc *fleetCase) stopServing(t *testing.T) {
	t.Helper()
	fc.stop()
	err := <-fc.served
	fc.served <- err
}

// tracedPlan serves a cache-aware plain model "m" (an approximate prefix index) on two
// engines and a PD model "pd", exporting spans to endpoint over gRPC.
func tracedPlan(endpoint string) *plan.Plan {
	g := approxGroup()
	p := testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2"), pdEngine("P1", plan.RolePrefill, 8998), pdEngine("D1", plan.RoleDecode, 0)},
		plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &g}}}},
		plan.Model{Name: "pd", Buckets: []plan.Bucket{{ID: "pdb", Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: group(plan.RoundRobin, plan.Admission{}), Decode: group(plan.PowerOfTwo, plan.Admission{}),
		}}}}})
	p.Tracing = &plan.Tracing{Endpoint: endpoint, Protocol: plan.TracingGRPC, SampleRatio: 1, ServiceName: "router-test"}
	return p
}

const (
	testTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpan  = "00f067aa0ba902b7"
)

func parentOf(trace string) string { return "00-" + trace + "-" + testSpan + "-01" }

// postWith sends a chat request with headers and returns the response (body read).
func (fc *fleetCase) postWith(t *testing.T, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, fc.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b.String())
	}
	return resp
}

// TestTracingSpansAndPropagation: a routed request's span continues the client's
// traceparent and carries the decision (model, bucket, engines, policies, the prefix the
// cache-aware pick was made for, attempts, status); each engine request (both PD
// halves) has a child span, and the engine receives a traceparent naming it, in the
// client's trace.
func TestTracingSpansAndPropagation(t *testing.T) {
	rc, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	fc := startFleet(t, tracedPlan(rc.GRPCAddr()))
	system := strings.Repeat("You are a careful assistant for the routing team; answer briefly and cite the runbook. ", 12)
	chat := func(q string) string {
		return `{"model": "m", "max_tokens": 2, "messages": [{"role": "system", "content": "` + system + `"}, {"role": "user", "content": "` + q + `"}]}`
	}
	fc.postWith(t, chat("first"), map[string]string{"Traceparent": parentOf("11111111111111111111111111111111")})
	fc.postWith(t, chat("second"), map[string]string{"Traceparent": parentOf(testTrace), "X-Request-Id": "client-42"})
	pdTrace := "22222222222222222222222222222222"
	fc.postWith(t, `{"model": "pd", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}`,
		map[string]string{"Traceparent": parentOf(pdTrace)})
	received := map[string]string{}
	for _, id := range []string{"E1", "E2", "P1", "D1"} {
		received[id] = fc.fleet.Engine(id).Received().Traceparent
	}
	fc.stopServing(t)

	spans := rc.Find(testTrace)
	if len(spans) != 2 {
		t.Fatalf("trace %s has %d spans, want the router's and its engine request's: %+v", testTrace, len(spans), rc.Spans())
	}
	server, engine := spans[0], spans[1] // "POST /v1/chat/completions", "engine plain"
	want := map[string]string{
		"router.model": "m", "router.bucket": "all", "router.policy.plain": "cache_aware", "router.request_id": "client-42",
		"router.bucket_attempts": "1", "router.retries": "0", "http.response.status_code": "200", "router.generation": "1",
		"router.engine.plain": engine.Attributes["router.engine"],
	}
	for k, v := range want {
		if server.Attributes[k] != v {
			t.Errorf("router span %s = %q, want %q", k, server.Attributes[k], v)
		}
	}
	if server.Kind != "server" || server.ParentSpanID != testSpan || server.Service != "router-test" || server.StatusError {
		t.Errorf("router span %+v: want a server span, child of the client's, of service router-test, not an error", server)
	}
	if n, _ := strconv.Atoi(server.Attributes["router.prefix_match_tokens"]); n < 128 {
		t.Errorf("router.prefix_match_tokens = %q, want the shared system prompt (128 tokens or more)", server.Attributes["router.prefix_match_tokens"])
	}
	if engine.Kind != "client" || engine.ParentSpanID != server.SpanID || engine.Attributes["router.stage"] != "plain" || engine.Attributes["http.response.status_code"] != "200" {
		t.Errorf("engine span %+v: want a client span, child of the router's, stage plain, status 200", engine)
	}
	if got, want := received[engine.Attributes["router.engine"]], "00-"+testTrace+"-"+engine.SpanID+"-01"; got != want {
		t.Errorf("engine %s received traceparent %q, want %q", engine.Attributes["router.engine"], got, want)
	}

	pd := rc.Find(pdTrace)
	if len(pd) != 3 {
		t.Fatalf("PD trace has %d spans, want the router's and both halves': %+v", len(pd), pd)
	}
	server = pd[0]
	if server.Attributes["router.engine.prefill"] != "P1" || server.Attributes["router.engine.decode"] != "D1" ||
		server.Attributes["router.policy.prefill"] != "round_robin" || server.Attributes["router.policy.decode"] != "power_of_two" ||
		server.Attributes["router.bucket"] != "pdb" {
		t.Errorf("PD router span attributes %v", server.Attributes)
	}
	if _, ok := server.Attributes["router.prefix_match_tokens"]; ok {
		t.Error("a round-robin pick reported a prefix match")
	}
	for _, half := range pd[1:] { // "engine decode", "engine prefill"
		id := half.Attributes["router.engine"]
		if half.ParentSpanID != server.SpanID || received[id] != "00-"+pdTrace+"-"+half.SpanID+"-01" {
			t.Errorf("%s: span %+v, engine received %q: want a child of the router's span whose context the engine got", id, half, received[id])
		}
	}
}

// TestTracingCollectorAway: with a collector nobody listens on, requests are served as
// usual and the router still stops cleanly.
func TestTracingCollectorAway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	fc := startFleet(t, tracedPlan(addr))
	for range 20 {
		resp := fc.postWith(t, `{"model": "pd", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}`, nil)
		if !strings.HasPrefix(fc.fleet.Engine("D1").Received().Traceparent, "00-") {
			t.Fatalf("engine got no traceparent (response %d)", resp.StatusCode)
		}
	}
	fc.stopServing(t)
}

// TestRequestIDs: the id a client sends in one of request_id.headers names its request
// in the response, at the engine, on the request's log line and in /admin/state; without
// one, or with a hostile one, the router makes one in SMG's format, and a hostile id is
// written nowhere.
func TestRequestIDs(t *testing.T) {
	generated := regexp.MustCompile(`^chatcmpl-[A-Za-z0-9]{24}$`)
	tests := []struct {
		name     string
		headers  []string // request_id.headers; nil = defaults
		sent     map[string]string
		want     string // "" = generated
		replaced bool
	}{
		{name: "x-request-id", sent: map[string]string{"X-Request-Id": "client-7.a:b_c"}, want: "client-7.a:b_c"},
		{name: "x-correlation-id", sent: map[string]string{"X-Correlation-Id": "corr-1"}, want: "corr-1"},
		{name: "none"},
		{name: "hostile", sent: map[string]string{"X-Request-Id": `evil" level=ERROR msg="forged`}, replaced: true},
		{name: "configured", headers: []string{"x-my-id"}, sent: map[string]string{"X-Request-Id": "ignored", "X-My-Id": "mine-1"}, want: "mine-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mixedPlan()
			p.RequestID.Headers = tt.headers
			var logs lockedBuffer
			fc := startFleetWith(t, p, 0, Options{RequestLog: slog.New(slog.NewTextHandler(&logs, nil))})
			resp := fc.postWith(t, `{"model": "pd", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}`, tt.sent)
			id := resp.Header.Get("X-Request-Id")
			if tt.want != "" && id != tt.want || tt.want == "" && !generated.MatchString(id) {
				t.Fatalf("response x-request-id %q, want %q (empty: generated)", id, tt.want)
			}
			for _, e := range []string{"P1", "D1"} {
				if got := fc.fleet.Engine(e).Received().RequestID; got != id {
					t.Errorf("%s received x-request-id %q, want %q", e, got, id)
				}
			}
			if st := fc.state(t); len(st.Decisions) == 0 || st.Decisions[0].RequestID != id {
				t.Errorf("/admin/state recent decisions: %+v, want request id %q", st.Decisions, id)
			}
			fc.stopServing(t)
			line := logs.String()
			if !regexp.MustCompile(` request_id=` + regexp.QuoteMeta(id) + `( |\n)`).MatchString(line) {
				t.Errorf("request log:\n%s\nwant request_id=%s", line, id)
			}
			if strings.Contains(line, "request_id_replaced=true") != tt.replaced || strings.Contains(line, "evil") {
				t.Errorf("request log:\n%s\nwant request_id_replaced=%v and nothing of a hostile id", line, tt.replaced)
			}
		})
	}
}

// TestEngineHeader: debug.engine_header names the plain engine or the PD pair a
// response came from; it is off by default.
func TestEngineHeader(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			p := mixedPlan()
			p.Debug.EngineHeader = on
			fc := startScaledFleet(t, p, 0)
			plain := fc.postWith(t, `{"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}`, nil).Header.Values("X-Router-Engine")
			pd := fc.postWith(t, `{"model": "pd", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}`, nil).Header.Values("X-Router-Engine")
			switch {
			case !on && (plain != nil || pd != nil):
				t.Errorf("engine header off, got %q and %q", plain, pd)
			case on && (len(plain) != 1 || (plain[0] != "E1" && plain[0] != "E2")):
				t.Errorf("plain: x-router-engine %q, want E1 or E2", plain)
			case on && (len(pd) != 1 || pd[0] != "prefill=P1,decode=D1"):
				t.Errorf("pd: x-router-engine %q, want prefill=P1,decode=D1", pd)
			}
		})
	}
}

// TestReloadEdgeSettings: a reload applies debug.engine_header and request_id at once,
// and refuses a change of tracing, which only a restart applies.
func TestReloadEdgeSettings(t *testing.T) {
	p := mixedPlan()
	var next *plan.Plan
	fc := startFleetWith(t, p, 0, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	body := `{"model": "pd", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}`

	next = clone(p)
	next.Debug.EngineHeader, next.RequestID.Headers = true, []string{"x-my-id"}
	if status, answer := fc.postJSON(t, "/admin/reload", ""); status != http.StatusOK {
		t.Fatalf("reload: %d %s", status, answer)
	}
	resp := fc.postWith(t, body, map[string]string{"X-My-Id": "mine-2"})
	if resp.Header.Get("X-Router-Engine") != "prefill=P1,decode=D1" || resp.Header.Get("X-Request-Id") != "mine-2" {
		t.Errorf("after reload: x-router-engine %q, x-request-id %q", resp.Header.Get("X-Router-Engine"), resp.Header.Get("X-Request-Id"))
	}

	traced := clone(next)
	traced.Tracing = &plan.Tracing{Endpoint: "127.0.0.1:4317", Protocol: plan.TracingGRPC, SampleRatio: 1, ServiceName: "router"}
	next = traced
	if status, answer := fc.postJSON(t, "/admin/reload", ""); status != http.StatusUnprocessableEntity || !strings.Contains(string(answer), "tracing changed, which only a restart applies") {
		t.Errorf("reload adding tracing: %d %s, want refused", status, answer)
	}
}
