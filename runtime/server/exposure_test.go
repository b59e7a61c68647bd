package server

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/plan"
)

// hostileEngine is a real HTTP server on 127.0.0.1 that answers like a misconfigured
// engine: cookies, a Server header, internal details in a 500, a redirect.
func hostileEngine(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Set-Cookie", "engine_session=abc")
		w.Header().Set("Server", "internal-engine/1.2")
		w.Header().Set("X-Internal-Node", "gpu-node-17")
		switch {
		case strings.Contains(string(body), "redirect"):
			http.Redirect(w, r, "http://10.1.2.3:9999/elsewhere", http.StatusFound)
		case strings.Contains(string(body), "crash"):
			http.Error(w, "Traceback: /opt/engine/secret.py line 3 at http://10.1.2.3:9999", http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"x","choices":[{"message":{"content":"ok"}}]}`))
		}
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// startRouter serves a router for p on 127.0.0.1 and returns its URL.
func startRouter(t *testing.T, p *plan.Plan) (*Server, string) {
	return startRouterWith(t, p, Options{})
}

// startRouterWith is startRouter with opts (its logger discards).
func startRouterWith(t *testing.T, p *plan.Plan, opts Options) (*Server, string) {
	opts.Logger = slog.New(slog.DiscardHandler)
	srv, err := New(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, "http://" + ln.Addr().String()
}

// Defect 9: engine URLs, engine bodies, cookies, Server headers and redirects stay with
// the router; the client gets the router's error with a request id.
func TestEngineDetailsDoNotReachClients(t *testing.T) {
	p := plainPlan("E1")
	p.Engines[0].URL = hostileEngine(t)
	p.Engines[0].Load.Source = "none"
	_, url := startRouter(t, p)
	for _, tc := range []struct {
		content string
		status  int
	}{{"fine", 200}, {"redirect", 502}, {"crash", 502}} {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(chat("m", tc.content, "")))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.content, resp.StatusCode, tc.status, body)
		}
		for _, h := range []string{"Set-Cookie", "Server", "X-Internal-Node", "Location"} {
			if v := resp.Header.Get(h); v != "" {
				t.Errorf("%s: the client got %s: %s", tc.content, h, v)
			}
		}
		for _, leak := range []string{"10.1.2.3", "127.0.0.1", "Traceback", "secret.py"} {
			if strings.Contains(string(body), leak) {
				t.Errorf("%s: the body leaks %q: %s", tc.content, leak, body)
			}
		}
		// One Date, the router's (the engine's is not passed on), a current one.
		if dates := resp.Header.Values("Date"); len(dates) != 1 {
			t.Errorf("%s: Date headers %q", tc.content, dates)
		} else if at, err := http.ParseTime(dates[0]); err != nil || time.Since(at) > time.Minute || time.Until(at) > time.Minute {
			t.Errorf("%s: Date %q (%v)", tc.content, dates[0], err)
		}
		id := resp.Header.Get("X-Request-Id")
		if id == "" || (tc.status != 200 && !strings.Contains(string(body), "request id "+id)) {
			t.Errorf("%s: request id %q missing from the error: %s", tc.content, id, body)
		}
	}
}

// Defect 9: the admin token works with the scheme in any case (RFC 9110: the scheme is
// case-insensitive).
func TestAdminBearerSchemeAnyCase(t *testing.T) {
	p := plainPlan("E1")
	p.AdminToken = "s3cret"
	fc := startFleet(t, p)
	for auth, want := range map[string]int{"Bearer s3cret": 200, "bearer s3cret": 200, "BEARER  s3cret": 200, "Bearer wrong": 401, "Basic s3cret": 401, "s3cret": 401} {
		req, _ := http.NewRequest(http.MethodGet, fc.url+"/admin/state", nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d", auth, resp.StatusCode, want)
		}
	}
}

// Defect 10: one header policy for both PD halves: hop-by-hop headers, those named by
// Connection, Cookie and the config's deny list are dropped; the rest reach both.
func TestHeaderPolicyIsTheSameForBothHalves(t *testing.T) {
	p := pdPlan()
	p.Headers.Deny = []string{"x-internal"}
	fc := startFleet(t, p)
	status, _, body := fc.post(t, chat("pd", "headers", `, "max_tokens": 2`),
		"Authorization", "Bearer client-key", "Cookie", "session=1", "Connection", "X-Hop", "X-Hop", "1",
		"X-Internal", "1", "X-Trace", "t-1", "Proxy-Authorization", "x")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var got [2]http.Header
	for i, e := range p.Engines {
		hs := fc.sent.headersTo(e.URL)
		if len(hs) != 1 {
			t.Fatalf("%s got %d requests", e.ID, len(hs))
		}
		got[i] = hs[0]
		for _, h := range []string{"Cookie", "X-Hop", "X-Internal", "Proxy-Authorization"} {
			if hs[0].Get(h) != "" {
				t.Errorf("%s got %s", e.ID, h)
			}
		}
		if hs[0].Get("Authorization") != "Bearer client-key" || hs[0].Get("X-Trace") != "t-1" || hs[0].Get("X-Request-Id") == "" {
			t.Errorf("%s headers: %v", e.ID, hs[0])
		}
	}
	for _, h := range []string{"Authorization", "X-Trace", "X-Request-Id", "Content-Type", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if got[0].Get(h) != got[1].Get(h) {
			t.Errorf("%s differs between the halves: %q vs %q", h, got[0].Get(h), got[1].Get(h))
		}
	}
	keys := func(h http.Header) string {
		ks := slices.Sorted(maps.Keys(h))
		return strings.Join(slices.DeleteFunc(ks, func(k string) bool { return k == "Content-Length" }), ",")
	}
	if keys(got[0]) != keys(got[1]) {
		t.Errorf("the halves got different headers:\n%s\n%s", keys(got[0]), keys(got[1]))
	}
	allow := dispatch.NewHeaderPolicy(plan.HeaderPolicy{Allow: []string{"authorization"}}).Outbound(http.Header{
		"Authorization": {"a"}, "X-Trace": {"t"}}, "id")
	if allow.Get("Authorization") != "a" || allow.Get("X-Trace") != "" {
		t.Errorf("allow list: %v", allow)
	}
}

// A client asking for gzip gets a readable answer: the router checks non-streamed answers,
// so it does not pass the preference on and asks the engine for identity instead.
func TestGzipClientGetsAPlainAnswer(t *testing.T) {
	fc := startFleet(t, plainPlan("E1"))
	status, _, body := fc.post(t, chat("m", "x", `, "max_tokens": 2`), "Accept-Encoding", "gzip")
	if status != 200 || !strings.Contains(body, `"choices"`) {
		t.Fatalf("%d %.200q", status, body)
	}
	if h := fc.sent.headersTo(fc.srv.current().plan.Engines[0].URL); len(h) != 1 || h[0]["Accept-Encoding"] == nil || h[0]["Accept-Encoding"][0] != "identity" || len(h[0]["Accept-Encoding"]) != 1 {
		t.Errorf("engine headers: %v", h)
	}
}
