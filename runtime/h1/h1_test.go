package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/rawtcp"
)

// echo is the tests' handler: it reads the body and answers with what it saw. Paths
// choose other answers: /status/N, /big (past the buffer), /flush, /trailer, /head.
func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/status/"):
		var code int
		_, _ = fmt.Sscanf(r.URL.Path, "/status/%d", &code)
		if code < 200 || code > 599 {
			code = 500
		}
		w.WriteHeader(code)
	case r.URL.Path == "/big":
		_, _ = w.Write(bytes.Repeat([]byte("x"), 5000))
		return
	case r.URL.Path == "/flush":
		_, _ = io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
	case r.URL.Path == "/trailer":
		w.Header().Set("Trailer", "X-Sum")
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Sum", "42")
		w.Header().Set(http.TrailerPrefix+"X-Late", "7")
		return
	case r.URL.Path == "/close":
		w.Header().Set("Connection", "close")
	}
	fmt.Fprintf(w, "%s %s host=%q len=%d\n", r.Method, r.URL.RequestURI(), r.Host, len(b))
}

// servers starts this package's server and net/http's on loopback with handler h and
// returns their addresses, ours first. Ours reads and writes with raw system calls
// (rawtcp), as the router serves it.
func servers(t testing.TB, h http.Handler, tune func(*Server)) (string, string) {
	t.Helper()
	ours := &Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	if tune != nil {
		tune(ours)
	}
	theirs := &http.Server{Handler: h, ReadHeaderTimeout: ours.ReadHeaderTimeout, IdleTimeout: ours.IdleTimeout, MaxHeaderBytes: ours.MaxHeaderBytes}
	var addrs []string
	for i, serve := range []func(net.Listener) error{ours.Serve, theirs.Serve} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		if i == 0 { // ours on the raw connections the router serves it on
			ln = rawtcp.Listener(ln)
		}
		go func() { _ = serve(ln) }()
	}
	t.Cleanup(func() { _ = ours.Close(); _ = theirs.Close() })
	return addrs[0], addrs[1]
}

// exchange sends raw to addr, half-closes, and returns all the server sent until it
// closed.
func exchange(t testing.TB, addr string, raw []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait.Timeout))
	go func() {
		_, _ = c.Write(raw)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	out, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("reading the answers to %q: %v", raw, err)
	}
	return out
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && strings.Contains(err.Error(), "reset")
}

// answer is one response as the tests compare it: the framing and Date left out.
type answer struct {
	Status  int
	Body    string
	Header  http.Header
	Trailer http.Header
}

// parse reads every response in out; method is each request's method, for HEAD.
func parse(t testing.TB, out []byte, methods []string) []answer {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(out))
	var as []answer
	for i := 0; ; i++ {
		if _, err := br.Peek(1); err != nil {
			return as
		}
		req := &http.Request{Method: http.MethodGet}
		if i < len(methods) {
			req.Method = methods[i]
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("response %d does not parse: %v\n%q", i, err, out)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d's body: %v\n%q", i, err, out)
		}
		h := resp.Header.Clone()
		for _, k := range []string{"Date", "Content-Length", "Transfer-Encoding", "Connection"} {
			delete(h, k)
		}
		as = append(as, answer{resp.StatusCode, string(b), h, resp.Trailer})
		if resp.StatusCode >= 200 && resp.Close {
			return as
		}
	}
}

// methods lists the methods of the requests in raw, as far as they parse.
func methods(raw []byte) []string {
	var ms []string
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return ms
		}
		ms = append(ms, req.Method)
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return ms
		}
	}
}

// agreeCases are requests both servers answer alike; FuzzServeConn starts from them.
var agreeCases = map[string]string{
	"get":           "GET /x?y=1 HTTP/1.1\r\nHost: h\r\n\r\n",
	"post":          "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
	"chunked":       "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"pipelined":     "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nokGET /c HTTP/1.1\r\nHost: h\r\n\r\n",
	"close":         "GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n",
	"handler close": "GET /close HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n",
	"http10":        "GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
	"http10 keep":   "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
	"http10 big":    "GET /big HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
	"head":          "HEAD /x HTTP/1.1\r\nHost: h\r\n\r\nHEAD /big HTTP/1.1\r\nHost: h\r\n\r\nGET /z HTTP/1.1\r\nHost: h\r\n\r\n",
	"statuses":      "GET /status/204 HTTP/1.1\r\nHost: h\r\n\r\nGET /status/404 HTTP/1.1\r\nHost: h\r\n\r\nGET /status/304 HTTP/1.1\r\nHost: h\r\n\r\nGET /z HTTP/1.1\r\nHost: h\r\n\r\n",
	"big":           "GET /big HTTP/1.1\r\nHost: h\r\n\r\nGET /z HTTP/1.1\r\nHost: h\r\n\r\n",
	"flush":         "GET /flush HTTP/1.1\r\nHost: h\r\n\r\nGET /z HTTP/1.1\r\nHost: h\r\n\r\n",
	"trailer":       "GET /trailer HTTP/1.1\r\nHost: h\r\n\r\n",
	"expect":        "POST /p HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
	"expect other":  "POST /p HTTP/1.1\r\nHost: h\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\nok",
	"no host":       "GET / HTTP/1.1\r\n\r\n",
	"two hosts":     "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"bad host":      "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	"bad name":      "GET / HTTP/1.1\r\nHost: a\r\nBad Name: v\r\n\r\n",
	"http2":         "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
	"garbage":       "\x00\x01hello\r\n\r\n",
	"huge head":     "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("a", 1<<20+10) + "\r\n\r\n",
	"bad te":        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
	"short body":    "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 50\r\n\r\nhello",
	"options star":  "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
	"post crlf":     "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok\r\nGET /z HTTP/1.1\r\nHost: h\r\n\r\n",
	"unread body":   "POST /status/201 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET /z HTTP/1.1\r\nHost: h\r\n\r\n",
}

func TestAgreesWithNetHTTP(t *testing.T) {
	ours, theirs := servers(t, http.HandlerFunc(echo), nil)
	for name, raw := range agreeCases {
		t.Run(name, func(t *testing.T) {
			ms := methods([]byte(raw))
			a := parse(t, exchange(t, ours, []byte(raw)), ms)
			b := parse(t, exchange(t, theirs, []byte(raw)), ms)
			if len(a) == 0 {
				t.Fatal("no answer")
			}
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("ours:\n%v\nnet/http's:\n%v", a, b)
			}
		})
	}
}

// The refusals that differ from net/http's (docs/differences.md): the absolute form and
// an empty Host are 400, HTTP/2's preface 505.
func TestRefusesMoreThanNetHTTP(t *testing.T) {
	ours, _ := servers(t, http.HandlerFunc(echo), nil)
	for raw, want := range map[string]int{
		"GET http://a/b HTTP/1.1\r\nHost: a\r\n\r\n":    400,
		"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n": 400,
		"GET / HTTP/1.1\r\nHost:\r\n\r\n":               400,
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n":              505,
	} {
		a := parse(t, exchange(t, ours, []byte(raw)), nil)
		if len(a) != 1 || a[0].Status != want {
			t.Errorf("%q: got %v, want one %d", raw, a, want)
		}
	}
}

// A flushed response reaches the client before the handler returns, and a 1xx goes at
// once.
func TestFlushSendsAtOnce(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Error(err)
		}
		<-release
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	ours, _ := servers(t, h, nil)
	resp, err := http.Get("http://" + ours + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q, %v before the handler ended", line, err)
	}
	close(release)
	if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("a flushed response is framed %v, want chunked", resp.TransferEncoding)
	}
}

// A client that leaves while its handler runs cancels the request's context; a write
// after that fails.
func TestClientLeavingCancels(t *testing.T) {
	gone := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
		var err error
		for range 100 { // the write buffer hides the first writes
			if _, err = w.Write(make([]byte, 4096)); err != nil {
				break
			}
			http.NewResponseController(w).Flush()
		}
		gone <- err
	})
	ours, _ := servers(t, h, nil)
	c, err := net.Dial("tcp", ours)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok")
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case err := <-gone:
		if err == nil {
			t.Error("writes after the client left all succeeded")
		}
	case <-time.After(wait.Timeout):
		t.Fatal("the handler's context was not cancelled when the client left")
	}
}

// Every request on a connection has the connection's context: it outlives the handler,
// so the requests that follow share it, and ends when the client leaves.
func TestRequestContextIsTheConnections(t *testing.T) {
	ctxs := make(chan context.Context, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ctxs <- r.Context() })
	ours, _ := servers(t, h, nil)
	c, err := net.Dial("tcp", ours)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for range 2 {
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	first, second := <-ctxs, <-ctxs
	if first != second || first.Err() != nil {
		t.Fatalf("the second request's context %v is not the first's %v, live after its handler (%v)", second, first, first.Err())
	}
	c.Close()
	select {
	case <-first.Done():
	case <-time.After(wait.Timeout):
		t.Fatal("the connection's context did not end when the client left")
	}
}

// ResponseController reaches the connection's deadlines.
func TestResponseControllerDeadlines(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Error(err)
		}
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Error(err)
		}
		_, err := io.ReadAll(r.Body)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("reading a trickled body past its deadline: %v", err)
		}
		w.WriteHeader(http.StatusRequestTimeout)
	})
	ours, _ := servers(t, h, nil)
	c, err := net.Dial("tcp", ours)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9\r\n\r\nabc")
	_ = c.SetReadDeadline(time.Now().Add(wait.Timeout))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("answer to a trickled body: %v, %v; want a 408 closing the connection", resp, err)
	}
}

// A panic in the handler closes the connection; http.ErrAbortHandler is not logged.
func TestHandlerPanicClosesConnection(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("part"))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})
	ours, _ := servers(t, h, nil)
	out := exchange(t, ours, []byte("GET / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("an aborted response read to %v, want io.ErrUnexpectedEOF", err)
	}
	if n := bytes.Count(out, []byte("HTTP/1.1 ")); n != 1 {
		t.Errorf("%d responses after an abort, want 1", n)
	}
}

// Writing past a declared Content-Length fails with http.ErrContentLength.
func TestWritePastContentLength(t *testing.T) {
	errc := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		_, _ = w.Write([]byte("abc"))
		_, err := w.Write([]byte("d"))
		errc <- err
	})
	ours, _ := servers(t, h, nil)
	a := parse(t, exchange(t, ours, []byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n")), nil)
	if err := <-errc; !errors.Is(err, http.ErrContentLength) {
		t.Errorf("write past the length: %v", err)
	}
	if len(a) != 1 || a[0].Body != "abc" {
		t.Errorf("got %v", a)
	}
}

// The ConnState hook sees net/http's transitions.
func TestConnStates(t *testing.T) {
	states := make(chan http.ConnState, 16)
	ours, _ := servers(t, http.HandlerFunc(echo), func(s *Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) { states <- st }
	})
	exchange(t, ours, []byte("GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n"))
	want := []http.ConnState{http.StateNew, http.StateActive, http.StateIdle, http.StateActive, http.StateIdle, http.StateClosed}
	var got []http.ConnState
	for len(got) < len(want) {
		select {
		case st := <-states:
			got = append(got, st)
		case <-time.After(wait.Timeout):
			t.Fatalf("states %v, want %v", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
}

// Shutdown closes idle connections at once, lets an active request finish with
// Connection: close, and Serve returns http.ErrServerClosed.
func TestShutdownFinishesActive(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		_, _ = io.WriteString(w, "done")
	})
	s := &Server{Handler: h, ReadHeaderTimeout: time.Second, IdleTimeout: time.Minute}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_, _ = io.WriteString(idle, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	idleBR := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(idleBR, nil); err != nil {
		t.Fatal(err)
	} else {
		_, _ = io.ReadAll(resp.Body)
	}
	active, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer active.Close()
	_, _ = io.WriteString(active, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	_ = idle.SetReadDeadline(time.Now().Add(wait.Timeout))
	if _, err := idleBR.ReadByte(); err != io.EOF {
		t.Errorf("the idle connection was not closed at shutdown: %v", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(active), nil)
	if err != nil {
		t.Fatalf("the in-flight request was lost: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" || !resp.Close {
		t.Errorf("in-flight answer %q, close %v; want done with Connection: close", b, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve returned %v", err)
	}
}

// Serve after Shutdown returns http.ErrServerClosed at once and closes its listener.
func TestServeAfterShutdown(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(echo)}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Shutdown: %v", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the listener is still open after Serve returned: %v", err)
	}
}

// BodyBuffered says whether the rest of the body is in the read buffer: a body sent with
// its head is, one still to come is not, and neither is a chunked body nor one the
// client sends only after a 100 Continue, whose reads may wait on the socket.
func TestBodyBuffered(t *testing.T) {
	type seen struct{ before, after bool }
	got := make(chan seen, 1)
	proceed := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := w.(interface{ BodyBuffered() bool })
		var s seen
		s.before = b.BodyBuffered()
		proceed <- struct{}{}
		_, _ = io.ReadAll(r.Body)
		s.after = b.BodyBuffered()
		got <- s
	})
	ours, _ := servers(t, h, nil)
	for _, tc := range []struct {
		name       string
		head, rest string // rest is sent once the handler has looked
		want       seen
	}{
		{"with its head", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", "", seen{true, true}},
		{"no body", "GET / HTTP/1.1\r\nHost: h\r\n\r\n", "", seen{true, true}},
		{"after its head", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\na", "bc", seen{false, true}},
		{"chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "", seen{false, true}},
		{"after a 100 Continue", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", "abc", seen{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ours)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = io.WriteString(c, tc.head)
			select {
			case <-proceed:
			case <-time.After(wait.Timeout):
				t.Fatal("the handler never ran")
			}
			_, _ = io.WriteString(c, tc.rest)
			select {
			case s := <-got:
				if s != tc.want {
					t.Errorf("BodyBuffered before and after the read: %+v, want %+v", s, tc.want)
				}
			case <-time.After(wait.Timeout):
				t.Fatal("the handler never finished")
			}
		})
	}
}
