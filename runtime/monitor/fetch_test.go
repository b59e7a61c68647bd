package monitor

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// countingServer is a real HTTP server that counts the connections it accepted.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func connFetcherOf(t *testing.T, base string) *connFetcher {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	f := newConnFetcher(base, u, time.Second)
	t.Cleanup(f.close)
	return f
}

// TestConnFetcherKeepsOneConnection: polls reuse one connection; an engine closing it
// while idle costs a redial, not a failed poll.
func TestConnFetcherKeepsOneConnection(t *testing.T) {
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+r.URL.Path)
	}))
	f := connFetcherOf(t, srv.URL)
	ctx := context.Background()
	for range 20 {
		body, err := f.get(ctx, "/v1/loads", time.Second)
		if err != nil || string(body) != "ok /v1/loads" {
			t.Fatalf("body %q, err %v", body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 20 polls, want 1", n)
	}
	srv.CloseClientConnections() // as uvicorn closes a connection idle for 5 s
	if body, err := f.get(ctx, "/health", time.Second); err != nil || string(body) != "ok /health" {
		t.Fatalf("after the engine closed the connection: body %q, err %v", body, err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want a second after the close", n)
	}
}

// TestConnFetcherAnswers: chunked, gzipped and closing answers are read whole, a non-2xx answer
// is an error carrying its status and body, and a body over the bound is refused.
func TestConnFetcherAnswers(t *testing.T) {
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			io.WriteString(w, "part one, ")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part two")
		case "/gzip":
			if r.Header.Get("Accept-Encoding") != "gzip" {
				http.Error(w, "want gzip", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, "vllm:num_requests_running 3\n")
			zw.Close()
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		case "/draining":
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		case "/huge":
			w.Header().Set("Content-Length", "16777217") // refused before it is read
			w.WriteHeader(http.StatusOK)
		}
	}))
	f := connFetcherOf(t, srv.URL)
	ctx := context.Background()
	if body, err := f.get(ctx, "/chunked", time.Second); err != nil || string(body) != "part one, part two" {
		t.Errorf("chunked: %q, %v", body, err)
	}
	for range 2 { // the second reuses the gzip reader
		if body, err := f.get(ctx, "/gzip", time.Second); err != nil || string(body) != "vllm:num_requests_running 3\n" {
			t.Errorf("gzip: %q, %v", body, err)
		}
	}
	if body, err := f.get(ctx, "/close", time.Second); err != nil || string(body) != "bye" {
		t.Errorf("closing: %q, %v", body, err)
	}
	_, err := f.get(ctx, "/draining", time.Second)
	if err == nil || !strings.Contains(err.Error(), "GET "+srv.URL+"/draining: 503 Service Unavailable: shutting down") {
		t.Errorf("503: %v", err)
	}
	if _, err := f.get(ctx, "/huge", time.Second); !errors.Is(err, errTooLarge) {
		t.Errorf("oversized body: %v", err)
	}
	if body, err := f.get(ctx, "/chunked", time.Second); err != nil || string(body) != "part one, part two" {
		t.Errorf("after failures: %q, %v", body, err)
	}
	if n := conns.Load(); n != 4 {
		t.Errorf("%d connections, want 4: the close, the 503 and the oversized body each end one", n)
	}
}

// TestConnFetcherStops: a poll an engine never answers ends at its timeout, or when
// the loop's context ends, whichever comes first.
func TestConnFetcherStops(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	f := connFetcherOf(t, srv.URL)

	if _, err := f.get(context.Background(), "/health", 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("hung engine: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := f.get(ctx, "/health", time.Hour)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled poll: %v", err)
	}
}

// TestFetcherChoice: plain HTTP gets a connection of its own; https, engine_transport
// net_http and a client injected by tests go through an http.Client.
func TestFetcherChoice(t *testing.T) {
	m := New(&plan.Plan{}, nil, nil, nil, slog.New(slog.DiscardHandler))
	if _, ok := m.newFetcher("http://127.0.0.1:8000").(*connFetcher); !ok {
		t.Error("plain HTTP: want a connection of the loop's own")
	}
	if _, ok := m.newFetcher("https://engine:8000").(*clientFetcher); !ok {
		t.Error("https: want the client")
	}
	// direct decides shard or loop too (start): only a plain-HTTP engine spoken to over
	// the monitor's own connections may go to a shard.
	if m.direct("http://127.0.0.1:8000") == nil || m.direct("https://engine:8000") != nil {
		t.Error("direct: want plain HTTP only")
	}
	m = New(&plan.Plan{EngineTransport: plan.TransportNetHTTP}, nil, nil, nil, slog.New(slog.DiscardHandler))
	if _, ok := m.newFetcher("http://127.0.0.1:8000").(*clientFetcher); !ok {
		t.Error("engine_transport net_http: want the client (the switch back)")
	}
	if m.direct("http://127.0.0.1:8000") != nil {
		t.Error("engine_transport net_http: want no shard")
	}
	m = New(&plan.Plan{}, nil, nil, http.DefaultClient, slog.New(slog.DiscardHandler))
	if _, ok := m.newFetcher("http://127.0.0.1:8000").(*clientFetcher); !ok {
		t.Error("injected client: want it used")
	}
	if m.direct("http://127.0.0.1:8000") != nil {
		t.Error("injected client: want no shard")
	}
}

// A poller's buffer grown by one large answer is let go at the next poll, so that an
// engine's single large report does not hold its memory for the poller's lifetime.
func TestReadBodyLetsLargeBufferGo(t *testing.T) {
	var buf bytes.Buffer
	large := strings.Repeat("x", 1<<20)
	if out, err := readBody(&buf, "http://e/v1/loads", 200, "OK", -1, strings.NewReader(large)); err != nil || len(out) != len(large) {
		t.Fatalf("large answer: %d bytes, %v", len(out), err)
	}
	if out, err := readBody(&buf, "http://e/v1/loads", 200, "OK", -1, strings.NewReader("{}")); err != nil || string(out) != "{}" {
		t.Fatalf("small answer: %q, %v", out, err)
	}
	if buf.Cap() > keepBytes {
		t.Errorf("buffer keeps %d bytes after a small answer, want at most %d", buf.Cap(), keepBytes)
	}
}
