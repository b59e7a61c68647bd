package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routerkit/router/internal/rawengine"
	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/upstream"
)

// transportEngine is a net/http engine on 127.0.0.1 that counts the connections it
// accepted and closed.
type transportEngine struct {
	*httptest.Server
	opened, closed atomic.Int32
}

func startTransportEngine(t *testing.T, h http.HandlerFunc) *transportEngine {
	t.Helper()
	e := &transportEngine{}
	e.Server = httptest.NewUnstartedServer(h)
	e.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			e.opened.Add(1)
		case http.StateClosed:
			e.closed.Add(1)
		}
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

func echoBody(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Write(b)
}

// The same cases through both engine transports (engine_transport "router" and
// "net_http"): the router's own transport must behave as net/http's where a dispatch can
// tell.
func TestEngineTransportsAgree(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, tr http.RoundTripper)
	}{
		{"requests share a connection", func(t *testing.T, tr http.RoundTripper) {
			e := startTransportEngine(t, echoBody)
			for i := range 3 {
				if status, body, err := rawengine.Post(t, tr, t.Context(), e.URL, fmt.Sprint("req", i)); err != nil || status != 200 || body != fmt.Sprint("req", i) {
					t.Fatalf("request %d: %d %q %v", i, status, body, err)
				}
			}
			if n := e.opened.Load(); n != 1 {
				t.Errorf("%d connections for three requests in a row, want 1", n)
			}
		}},
		{"an in-memory body in parts", func(t *testing.T, tr http.RoundTripper) {
			e := startTransportEngine(t, echoBody)
			for _, size := range []int{10, 1 << 20} {
				head, tail := []byte(strings.Repeat("h", size)), []byte(`,"bootstrap_room":7}`)
				body := upstream.NewBody(head, tail)
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL, body)
				req.ContentLength = body.Len()
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(got) != string(head)+string(tail) {
					t.Fatalf("%d bytes and a tail: the engine got %d bytes back (%v)", size, len(got), err)
				}
			}
		}},
		{"engine closes the idle connection", func(t *testing.T, tr http.RoundTripper) {
			e := startTransportEngine(t, echoBody)
			if _, _, err := rawengine.Post(t, tr, t.Context(), e.URL, "one"); err != nil {
				t.Fatal(err)
			}
			e.CloseClientConnections()
			wait.For(t, "the engine to close the idle connection", func() bool { return e.closed.Load() == 1 })
			status, body, err := rawengine.Post(t, tr, t.Context(), e.URL, "two")
			if _, std := tr.(*http.Transport); std && err != nil {
				// net/http's Transport notices the close in a reading goroutine; a POST sent
				// on the connection before it did fails, and is not retried (not idempotent).
				// The router's transport peeks at the socket before each reuse.
				t.Logf("net/http: the request crossed the engine's close: %v", err)
				return
			}
			if err != nil || status != 200 || body != "two" {
				t.Fatalf("after the engine closed the idle connection: %d %q %v", status, body, err)
			}
			if n := e.opened.Load(); n != 2 {
				t.Errorf("%d connections, want 2", n)
			}
		}},
		{"body closed early is not reused", func(t *testing.T, tr http.RoundTripper) {
			e := startTransportEngine(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", 1<<20)) })
			req, _ := http.NewRequest(http.MethodGet, e.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if status, body, err := rawengine.Post(t, tr, t.Context(), e.URL, ""); err != nil || status != 200 || len(body) != 1<<20 {
				t.Fatalf("next request: %d, %d bytes, %v", status, len(body), err)
			}
			if n := e.opened.Load(); n != 2 {
				t.Errorf("%d connections, want 2", n)
			}
		}},
		{"cancellation ends the request", func(t *testing.T, tr http.RoundTripper) {
			release := make(chan struct{})
			e := startTransportEngine(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hang" {
					<-release
				}
			})
			defer close(release)
			ctx, cancel := context.WithCancelCause(t.Context())
			cause := errors.New("first-byte deadline")
			time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
			if _, _, err := rawengine.Post(t, tr, ctx, e.URL+"/hang", "x"); !errors.Is(err, cause) && !errors.Is(err, context.Canceled) {
				t.Fatalf("a request whose context ended: %v, want it cancelled", err)
			}
			if status, _, err := rawengine.Post(t, tr, t.Context(), e.URL, "x"); err != nil || status != 200 {
				t.Fatalf("next request: %d %v", status, err)
			}
			if n := e.opened.Load(); n != 2 {
				t.Errorf("%d connections, want 2 (the cut one is not reused)", n)
			}
		}},
		{"informational answers are skipped", func(t *testing.T, tr http.RoundTripper) {
			hint := "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
			u := rawengine.Start(t, hint+hint+"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false)
			if status, body, err := rawengine.Post(t, tr, t.Context(), u, "x"); err != nil || status != 200 || body != "ok" {
				t.Errorf("after two 1xx: %d %q %v", status, body, err)
			}
		}},
		{"Connection: close is honoured", func(t *testing.T, tr http.RoundTripper) {
			e := startTransportEngine(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
				io.WriteString(w, "ok")
			})
			for range 2 {
				if status, body, err := rawengine.Post(t, tr, t.Context(), e.URL, "x"); err != nil || status != 200 || body != "ok" {
					t.Fatalf("%d %q %v", status, body, err)
				}
			}
			if n := e.opened.Load(); n != 2 {
				t.Errorf("%d connections, want 2", n)
			}
		}},
		{"an early answer is the answer", func(t *testing.T, tr http.RoundTripper) {
			u := rawengine.Start(t, "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig", true)
			if status, body, err := rawengine.Post(t, tr, t.Context(), u, strings.Repeat("x", 8<<20)); err != nil || status != 413 || body != "big" {
				t.Fatalf("early answer: %d %q %v", status, body, err)
			}
		}},
		{"response headers are bounded", func(t *testing.T, tr http.RoundTripper) {
			long := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 1100) + "Content-Length: 2\r\n\r\nok"
			if _, _, err := rawengine.Post(t, tr, t.Context(), rawengine.Start(t, long, false), "x"); err == nil {
				t.Error("1.1 MB of headers were taken")
			}
			fine := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 900) + "Content-Length: 2\r\n\r\nok"
			if status, body, err := rawengine.Post(t, tr, t.Context(), rawengine.Start(t, fine, false), "x"); err != nil || status != 200 || body != "ok" {
				t.Errorf("0.9 MB of headers: %d %q %v", status, body, err)
			}
		}},
	}
	for _, kind := range []plan.EngineTransport{plan.TransportRouter, plan.TransportNetHTTP} {
		for _, tc := range cases {
			t.Run(string(kind)+"/"+tc.name, func(t *testing.T) {
				tc.run(t, NewTransport(TimeoutsOf(plan.Timeouts{}), kind, nil))
			})
		}
	}
}

// The switch picks the transport: net_http is Go's own.
func TestEngineTransportSwitch(t *testing.T) {
	if _, ok := NewTransport(TimeoutsOf(plan.Timeouts{}), plan.TransportNetHTTP, nil).(*http.Transport); !ok {
		t.Error("engine_transport net_http is not net/http's Transport")
	}
	if _, ok := NewTransport(TimeoutsOf(plan.Timeouts{}), plan.TransportRouter, nil).(*http.Transport); ok {
		t.Error("engine_transport router is net/http's Transport")
	}
}
