package server

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzExplainRequest feeds POST /admin/explain (control's decoder, on a loopback-only
// router): it never panics.
func FuzzExplainRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m","input_tokens":5,"max_tokens":3,"session_id":"s"}`, `{"input_tokens":-1}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`, `{}`} {
		f.Add([]byte(s))
	}
	srv, err := New(plainPlan("E1"), Options{})
	if err != nil {
		f.Fatal(err)
	}
	srv.loopbackOnly.Store(true)
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/admin/explain", bytes.NewReader(body)))
	})
}

// TestTokenCacheMetrics: preparing the same long conversation twice counts a miss per
// message, then a hit per message, in the token cache's series.
func TestTokenCacheMetrics(t *testing.T) {
	srv, err := New(plainPlan("E1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	read := func() (hits, misses float64) {
		fams, err := srv.metrics.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "tokenizer" || l[0].GetValue() != "standin" {
					continue
				}
				switch f.GetName() {
				case "router_token_cache_hits_total":
					hits = m.GetCounter().GetValue()
				case "router_token_cache_misses_total":
					misses = m.GetCounter().GetValue()
				}
			}
		}
		return hits, misses
	}
	body := longChat(2000)
	unseen(body) // new to this process's stand-in cache
	hits0, misses0 := read()
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		if _, err := srv.current().prepare(httptest.NewRecorder(), r, srv.current().models.Chat); err != nil {
			t.Fatal(err)
		}
	}
	hits, misses := read()
	const turns = 4 // 2000 words in turns of 500; the last user turn "and now?" is short
	if hits-hits0 < turns || misses-misses0 < turns {
		t.Fatalf("token cache series moved by %v hits and %v misses, want at least %d each", hits-hits0, misses-misses0, turns)
	}
}

// FuzzMetricsListener writes arbitrary bytes to the metrics listener (metrics.listen) over
// a real connection: whatever they are, the answer, if any, is an HTTP response that is
// 200 only for GET or HEAD /metrics, and the listener keeps serving.
func FuzzMetricsListener(f *testing.F) {
	for _, s := range []string{"GET /metrics HTTP/1.1\r\nHost: m\r\n\r\n", "POST /metrics HTTP/1.1\r\nHost: m\r\nContent-Length: 5\r\n\r\nhello",
		"GET /admin/state HTTP/1.1\r\nHost: m\r\n\r\n", "GET /metrics HTTP/1.1\r\nHost: m\r\nX: " + strings.Repeat("a", 20000) + "\r\n\r\n",
		"\x16\x03\x01\x00", "GET /../metrics HTTP/1.0\r\n\r\n"} {
		f.Add([]byte(s))
	}
	srv, err := New(plainPlan("E1"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeMetrics(ctx, ln) }()
	f.Cleanup(func() { cancel(); <-done })
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		go func() { _, _ = c.Write(data); _ = c.(*net.TCPConn).CloseWrite() }()
		req, reqErr := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			return // closed without an answer: acceptable for bytes that are no request
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && (reqErr != nil || req.URL.Path != "/metrics" || (req.Method != http.MethodGet && req.Method != http.MethodHead)) {
			t.Fatalf("200 for %q", data)
		}
		resp, err = http.Get("http://" + ln.Addr().String() + "/metrics")
		if err != nil {
			t.Fatalf("the listener stopped serving: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics after %q: %d", data, resp.StatusCode)
		}
	})
}
