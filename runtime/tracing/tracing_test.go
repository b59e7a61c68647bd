package tracing

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/internal/otlptest"
	"github.com/routerkit/router/runtime/plan"
)

const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan   = "00f067aa0ba902b7"
	clientParent = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// engineStub is a real HTTP server that records the traceparent of each request.
type engineStub struct {
	mu     sync.Mutex
	parent []string
	state  []string
}

func (e *engineStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.parent = append(e.parent, r.Header.Get("Traceparent"))
	e.state = append(e.state, r.Header.Get("Tracestate"))
	e.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "ok")
}

// tracedEngine starts a receiver, a Tracer exporting to it over gRPC and an engine stub,
// all stopped when the test ends.
func tracedEngine(t *testing.T) (*otlptest.Receiver, *Tracer, *engineStub, string) {
	t.Helper()
	rc, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	tr, err := New(plan.Tracing{Endpoint: rc.GRPCAddr(), Protocol: plan.TracingGRPC, SampleRatio: 1, ServiceName: "r"}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	eng := &engineStub{}
	srv := httptest.NewServer(eng)
	t.Cleanup(srv.Close)
	return rc, tr, eng, srv.URL
}

// roundTrip sends one traced request through a Tracer as the router does: a server
// span from the client's headers, an engine span for the request to the engine.
func roundTrip(t *testing.T, tr *Tracer, engineURL string, clientHeaders map[string]string) {
	t.Helper()
	in := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	for k, v := range clientHeaders {
		in.Header.Set(k, v)
	}
	in, span := tr.Start(in)
	out, err := http.NewRequestWithContext(in.Context(), http.MethodPost, engineURL+"/v1/chat/completions", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	out.Header = in.Header.Clone() // dispatch sends engines a copy of the client's headers
	out = tr.StartEngine(out, "E1", "plain")
	resp, err := tr.Transport(http.DefaultTransport).RoundTrip(out)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	span.End()
}

func TestExportAndPropagation(t *testing.T) {
	tests := []struct {
		name, protocol string
		endpoint       func(*otlptest.Receiver) string
	}{
		{"grpc host:port", plan.TracingGRPC, func(rc *otlptest.Receiver) string { return rc.GRPCAddr() }},
		{"grpc url", plan.TracingGRPC, func(rc *otlptest.Receiver) string { return "http://" + rc.GRPCAddr() }},
		{"http url", plan.TracingHTTP, func(rc *otlptest.Receiver) string { return "http://" + rc.HTTPAddr() + "/v1/traces" }},
		{"http host:port", plan.TracingHTTP, func(rc *otlptest.Receiver) string { return rc.HTTPAddr() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			protocol := tt.protocol
			rc, err := otlptest.Start()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			endpoint := tt.endpoint(rc)
			tr, err := New(plan.Tracing{Endpoint: endpoint, Protocol: protocol, SampleRatio: 1, ServiceName: "router-test"}, slog.Default())
			if err != nil {
				t.Fatal(err)
			}
			eng := &engineStub{}
			srv := httptest.NewServer(eng)
			defer srv.Close()
			roundTrip(t, tr, srv.URL, map[string]string{"Traceparent": clientParent, "Tracestate": "vendor=client"})
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := rc.Find(clientTrace)
			if len(spans) != 2 {
				t.Fatalf("got %d spans of the client's trace, want 2 (server and engine): %+v", len(spans), rc.Spans())
			}
			server, engine := spans[0], spans[1] // by name: "POST /v1/...", then "engine plain"
			if server.Kind != "server" || server.ParentSpanID != clientSpan || server.Service != "router-test" {
				t.Errorf("server span = %+v, want kind server, parent %s, service router-test", server, clientSpan)
			}
			if engine.Kind != "client" || engine.ParentSpanID != server.SpanID {
				t.Errorf("engine span = %+v, want kind client, parent %s", engine, server.SpanID)
			}
			if engine.Attributes["router.engine"] != "E1" || engine.Attributes["router.stage"] != "plain" || engine.Attributes["http.response.status_code"] != "200" {
				t.Errorf("engine span attributes = %v", engine.Attributes)
			}
			want := "00-" + clientTrace + "-" + engine.SpanID + "-01"
			if eng.parent[0] != want {
				t.Errorf("engine got traceparent %q, want %q (the router's engine span)", eng.parent[0], want)
			}
			if eng.state[0] != "vendor=client" {
				t.Errorf("engine got tracestate %q, want the client's, carried in the context", eng.state[0])
			}
		})
	}
}

// TestInvalidTraceparentStartsATrace checks a malformed traceparent is not continued
// nor passed on: the engine gets the router's own new trace.
func TestInvalidTraceparentStartsATrace(t *testing.T) {
	rc, tr, eng, url := tracedEngine(t)
	roundTrip(t, tr, url, map[string]string{"Traceparent": strings.Repeat("f", 4096), "Tracestate": "Not A Key=" + strings.Repeat("x", 300)})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rc.Spans()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	for _, s := range spans {
		if s.TraceID == clientTrace || s.TraceID != spans[0].TraceID {
			t.Errorf("span %s in trace %s: want one new trace", s.Name, s.TraceID)
		}
	}
	if !strings.HasPrefix(eng.parent[0], "00-"+spans[0].TraceID+"-") || eng.state[0] != "" {
		t.Errorf("engine got traceparent %q tracestate %q, want the router's new trace and no tracestate", eng.parent[0], eng.state[0])
	}
}

// TestUnsampledParentPropagates checks a client that does not sample gets no spans
// exported but its engines still continue its trace, unsampled.
func TestUnsampledParentPropagates(t *testing.T) {
	rc, tr, eng, url := tracedEngine(t)
	roundTrip(t, tr, url, map[string]string{"Traceparent": "00-" + clientTrace + "-" + clientSpan + "-00"})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rc.Spans()); n != 0 {
		t.Errorf("exported %d spans of an unsampled trace", n)
	}
	if !strings.HasPrefix(eng.parent[0], "00-"+clientTrace+"-") || !strings.HasSuffix(eng.parent[0], "-00") {
		t.Errorf("engine got traceparent %q, want the client's trace, unsampled", eng.parent[0])
	}
}

// TestUnreachableCollector checks that a collector nobody listens on never holds a
// request up: many more spans than the queue holds all start and end (a blocking
// export would hang the test), and shutdown returns within its deadline.
func TestUnreachableCollector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	logs := &recordedLogs{}
	log := slog.New(logs)
	for _, protocol := range []string{plan.TracingGRPC, plan.TracingHTTP} {
		t.Run(protocol, func(t *testing.T) {
			tr, err := New(plan.Tracing{Endpoint: addr, Protocol: protocol, SampleRatio: 1, ServiceName: "r"}, log)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 * queueSize {
				_, span := tr.Start(httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil))
				span.End()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = tr.Shutdown(ctx) // fails: the spans cannot go anywhere
		})
	}
	if msgs := logs.messages(); !slices.Contains(msgs, "tracing: exporting spans failed; requests are served as usual, spans may be dropped (check tracing.endpoint and the collector)") {
		t.Errorf("no export failure logged; log: %q", msgs)
	}
}

// recordedLogs is a slog handler keeping the messages of the records it gets.
type recordedLogs struct {
	mu   sync.Mutex
	msgs []string
}

func (l *recordedLogs) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordedLogs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *recordedLogs) WithGroup(string) slog.Handler            { return l }
func (l *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}

func (l *recordedLogs) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs)
}

func TestErrorLogRateLimit(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	e := newErrorLog(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
	e.Handle(errors.New("first"))
	e.Handle(errors.New("second"))
	now = now.Add(logEvery - time.Second)
	e.Handle(errors.New("third"))
	now = now.Add(2 * time.Second)
	e.Handle(errors.New("fourth"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "error=first") || !strings.Contains(lines[1], "error=fourth errors_not_logged=2") {
		t.Errorf("logged:\n%s\nwant first, then fourth with 2 not logged", buf.String())
	}
}

// TestTransportPassesOtherRequests checks requests without an engine span (health
// polls) go through untouched, their bodies unwrapped.
func TestTransportPassesOtherRequests(t *testing.T) {
	srv := httptest.NewServer(&engineStub{})
	defer srv.Close()
	tr := &Tracer{}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := tr.Transport(http.DefaultTransport).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, wrapped := resp.Body.(*endOnClose); wrapped {
		t.Error("a request without an engine span got its body wrapped")
	}
}
