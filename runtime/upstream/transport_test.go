package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routerkit/router/internal/rawengine"
	"github.com/routerkit/router/internal/wait"
)

// engine is a net/http server on 127.0.0.1 that counts the connections it accepted.
type engine struct {
	*httptest.Server
	conns atomic.Int32
}

func startEngine(t *testing.T, h http.HandlerFunc) *engine {
	t.Helper()
	e := &engine{}
	e.Server = httptest.NewUnstartedServer(h)
	e.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.Start()
	t.Cleanup(e.Close)
	return e
}

func newTransport() *Transport {
	return &Transport{Dial: (&net.Dialer{}).DialContext, Fallback: http.DefaultTransport}
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.URL.Query().Get("stream") != "" {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %s %d\n\n", b, i)
			w.(http.Flusher).Flush()
		}
		return
	}
	w.Write(b)
}

func TestRequestsShareAConnection(t *testing.T) {
	e := startEngine(t, echo)
	tr := newTransport()
	for i, u := range []string{e.URL + "/a", e.URL + "/b?stream=1", e.URL + "/c"} {
		status, body, err := rawengine.Post(t, tr, context.Background(), u, fmt.Sprint("req", i))
		if err != nil || status != 200 {
			t.Fatalf("request %d: %d %v", i, status, err)
		}
		want := fmt.Sprint("req", i)
		if i == 1 {
			want = "data: req1 0\n\ndata: req1 1\n\ndata: req1 2\n\n"
		}
		if body != want {
			t.Errorf("request %d: body %q, want %q", i, body, want)
		}
	}
	if n := e.conns.Load(); n != 1 {
		t.Errorf("%d connections for three requests in a row, want 1", n)
	}
}

// An engine that closes an idle connection (its keep-alive timeout) does not fail the
// next request: the pool sees the close and dials again.
func TestEngineClosedIdleConnection(t *testing.T) {
	e := startEngine(t, echo)
	tr := newTransport()
	if _, _, err := rawengine.Post(t, tr, context.Background(), e.URL, "one"); err != nil {
		t.Fatal(err)
	}
	e.CloseClientConnections()
	wait.For(t, "the engine's close to reach the idle connection", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		l := tr.idle[strings.TrimPrefix(e.URL, "http://")]
		return len(l) == 1 && !l[0].peeker.alive()
	})
	status, body, err := rawengine.Post(t, tr, context.Background(), e.URL, "two")
	if err != nil || status != 200 || body != "two" {
		t.Fatalf("after the engine closed the idle connection: %d %q %v", status, body, err)
	}
	if n := e.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// A body closed before its end takes its connection with it: the rest of the answer
// would be read as the next response.
func TestBodyClosedEarlyIsNotReused(t *testing.T) {
	e := startEngine(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 64<<10))
	})
	tr := newTransport()
	req, _ := http.NewRequest(http.MethodGet, e.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 10)); err == nil {
		t.Error("a closed body still reads")
	}
	if status, body, err := rawengine.Post(t, tr, context.Background(), e.URL, ""); err != nil || status != 200 || len(body) != 64<<10 {
		t.Fatalf("next request: %d, %d bytes, %v", status, len(body), err)
	}
	if n := e.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// A request whose context ends stops waiting at once, and its connection is not reused.
func TestContextEndsTheRequest(t *testing.T) {
	release := make(chan struct{})
	e := startEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-release
		}
	})
	defer close(release)
	tr := newTransport()
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("first-byte deadline")
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	_, _, err := rawengine.Post(t, tr, ctx, e.URL+"/hang", "x")
	if !errors.Is(err, cause) || time.Since(start) > 5*time.Second {
		t.Fatalf("a request whose context ended: %v after %v, want its cause", err, time.Since(start))
	}
	if context.Cause(ctx) != cause {
		t.Fatal("the context's cause changed")
	}
	// A context that has already ended sends nothing.
	if _, _, err := rawengine.Post(t, tr, ctx, e.URL, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("an ended context: %v, want context.Canceled", err)
	}
	if status, _, err := rawengine.Post(t, tr, context.Background(), e.URL, "x"); err != nil || status != 200 {
		t.Fatalf("next request: %d %v", status, err)
	}
	if n := e.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the cut one is not reused)", n)
	}
}

func TestInformationalResponses(t *testing.T) {
	hint := "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
	final := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	tr := newTransport()
	status, body, err := rawengine.Post(t, tr, context.Background(), rawengine.Start(t, hint+hint+final, false), "x")
	if err != nil || status != 200 || body != "ok" {
		t.Errorf("after two 1xx: %d %q %v", status, body, err)
	}
	_, _, err = rawengine.Post(t, tr, context.Background(), rawengine.Start(t, strings.Repeat(hint, max1xx+1)+final, false), "x")
	if !errors.Is(err, errTooMany1xx) {
		t.Errorf("after %d 1xx: %v, want errTooMany1xx", max1xx+1, err)
	}
}

// An engine that asks to close the connection gets a new one for the next request.
func TestConnectionCloseIsHonoured(t *testing.T) {
	e := startEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	})
	tr := newTransport()
	for range 2 {
		if status, body, err := rawengine.Post(t, tr, context.Background(), e.URL, "x"); err != nil || status != 200 || body != "ok" {
			t.Fatalf("%d %q %v", status, body, err)
		}
		if n := tr.idleTo(e.URL); n != 0 {
			t.Fatalf("%d idle connections kept after Connection: close", n)
		}
	}
	if n := e.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

type recordedTrip struct{ n atomic.Int32 }

func (r *recordedTrip) RoundTrip(req *http.Request) (*http.Response, error) {
	r.n.Add(1)
	return &http.Response{StatusCode: 299, Body: http.NoBody, Request: req}, nil
}

// https and proxied requests go to the fallback transport.
func TestFallback(t *testing.T) {
	fb := &recordedTrip{}
	tr := &Transport{Dial: (&net.Dialer{}).DialContext, Fallback: fb}
	if status, _, err := rawengine.Post(t, tr, context.Background(), "https://engine.invalid/v1", "x"); err != nil || status != 299 {
		t.Fatalf("https: %d %v", status, err)
	}
	proxy, _ := url.Parse("http://proxy.invalid:3128")
	tr.Proxy = http.ProxyURL(proxy)
	if status, _, err := rawengine.Post(t, tr, context.Background(), "http://engine.invalid/v1", "x"); err != nil || status != 299 {
		t.Fatalf("proxied: %d %v", status, err)
	}
	if fb.n.Load() != 2 {
		t.Errorf("fallback took %d requests, want 2", fb.n.Load())
	}
}

// idleTo is how many idle connections the pool keeps to engine URL u.
func (t *Transport) idleTo(u string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle[strings.TrimPrefix(u, "http://")])
}

func TestIdleBoundAndTimeout(t *testing.T) {
	block := make(chan struct{})
	e := startEngine(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-block
		}
	})
	tr := newTransport()
	tr.MaxIdlePerHost, tr.IdleTimeout = 1, 100*time.Millisecond
	done := make(chan error, 2)
	for range 2 {
		go func() { _, _, err := rawengine.Post(t, tr, context.Background(), e.URL+"/slow", "x"); done <- err }()
	}
	wait.For(t, "both requests' connections", func() bool { return e.conns.Load() == 2 })
	close(block)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if kept := tr.idleTo(e.URL); kept != 1 {
		t.Fatalf("%d idle connections kept with a bound of 1", kept)
	}
	time.Sleep(250 * time.Millisecond) // past the idle timeout
	if _, _, err := rawengine.Post(t, tr, context.Background(), e.URL, "x"); err != nil {
		t.Fatal(err)
	}
	if n := e.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3: the idle one timed out", n)
	}
}

// scriptedConn is a connection whose writes fail after limit bytes and whose reads
// return answer: an engine that answers and closes before reading the whole request.
type scriptedConn struct {
	net.Conn
	limit  int
	answer *strings.Reader
}

func (c *scriptedConn) Write(p []byte) (int, error) {
	if len(p) > c.limit {
		return c.limit, errors.New("connection reset by peer")
	}
	c.limit -= len(p)
	return len(p), nil
}

func (c *scriptedConn) Read(p []byte) (int, error)       { return c.answer.Read(p) }
func (c *scriptedConn) Close() error                     { return nil }
func (c *scriptedConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptedConn) SetWriteDeadline(time.Time) error { return nil }

// An engine's early answer to a request it did not read is the request's answer, and
// its connection is not reused: for a body written after the head (1 MiB) and for one
// written with it, by the answer's first read (a few bytes, see conn.pend). The engine
// takes 50 bytes, less than the head.
func TestEarlyAnswerBeatsTheWriteError(t *testing.T) {
	for _, size := range []int{1 << 20, 3} {
		dials := 0
		tr := &Transport{Fallback: http.DefaultTransport, Dial: func(context.Context, string, string) (net.Conn, error) {
			dials++
			return &scriptedConn{limit: 50, answer: strings.NewReader("HTTP/1.1 413 Payload Too Large\r\nContent-Length: 3\r\n\r\nbig")}, nil
		}}
		for range 2 {
			status, body, err := rawengine.Post(t, tr, context.Background(), "http://engine.test", strings.Repeat("x", size))
			if err != nil || status != 413 || body != "big" {
				t.Fatalf("early answer to %d bytes: %d %q %v", size, status, body, err)
			}
		}
		if dials != 2 {
			t.Errorf("%d bytes: %d dials, want 2", size, dials)
		}
		tr.Dial = func(context.Context, string, string) (net.Conn, error) {
			return &scriptedConn{limit: 50, answer: strings.NewReader("")}, nil
		}
		if _, _, err := rawengine.Post(t, tr, context.Background(), "http://engine.test", strings.Repeat("x", size)); err == nil || !strings.Contains(err.Error(), "reset") {
			t.Errorf("no answer to %d bytes: %v, want the write error", size, err)
		}
	}
}

// An engine's response headers are bounded: endless ones are an error, not memory.
func TestResponseHeadersAreBounded(t *testing.T) {
	tr := newTransport()
	long := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 1100) + "Content-Length: 2\r\n\r\nok"
	if _, _, err := rawengine.Post(t, tr, context.Background(), rawengine.Start(t, long, false), "x"); !errors.Is(err, errHeadersTooLong) {
		t.Errorf("1.1 MB of headers: %v, want errHeadersTooLong", err)
	}
	// Under the bound, and the body after the headers is not counted against it.
	fine := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 900) + "Content-Length: 2000000\r\n\r\n" + strings.Repeat("b", 2000000)
	status, body, err := rawengine.Post(t, tr, context.Background(), rawengine.Start(t, fine, false), "x")
	if err != nil || status != 200 || len(body) != 2000000 {
		t.Errorf("0.9 MB of headers and a 2 MB body: %d, %d bytes, %v", status, len(body), err)
	}
}

// A body whose request's context ends fails its read with the context's cause.
func TestContextEndsTheBody(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	e := startEngine(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-release
	})
	ctx, cancel := context.WithCancelCause(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL, nil)
	resp, err := newTransport().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("stream-idle deadline")
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, cause) {
		t.Errorf("read after the context ended: %v, want its cause", err)
	}
}
