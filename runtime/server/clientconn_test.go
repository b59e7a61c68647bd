package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

// flooder opens keep-alive connections to the router from 127.0.0.2 (a client address of
// its own), asks GET /health once on each and leaves it idle.
type flooder struct {
	t     *testing.T
	addr  string
	conns []net.Conn
}

// open opens one connection and asks /health on it; it reports whether an answer came
// (false: the router closed the connection at once). guard bounds a router that never
// answers: that is the lockout this file tests against.
func (f *flooder) open(guard time.Duration) bool {
	f.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := d.Dial("tcp", f.addr)
	if err != nil {
		f.t.Fatalf("dialing from 127.0.0.2: %v", err)
	}
	f.t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(guard))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: r\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			f.t.Fatalf("connection %d got no answer within %v: the open connections lock clients out", len(f.conns)+1, guard)
		}
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetDeadline(time.Time{})
	f.conns = append(f.conns, c)
	return true
}

// closedByRouter counts the flooder's answered connections the router has closed since.
func (f *flooder) closedByRouter() int {
	n := 0
	for _, c := range f.conns {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || (err != nil && !isTimeout(err)) {
			n++
		}
	}
	return n
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// served asks the router path on a fresh connection from 127.0.0.1 within a second, and
// fails the test unless it answers 200.
func served(t *testing.T, url, method, path, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s from another client during the flood: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s from another client during the flood: %d %s", method, path, resp.StatusCode, b)
	}
}

// Issue 25's reproduction at a smaller cap: one client opens twice max_connections idle
// keep-alive connections; the longest idle ones give way, every one of the flood's
// requests is answered, and another client's chat and /metrics are served within a
// second.
func TestIdleFloodDoesNotLockOut(t *testing.T) {
	forClientTransports(t, func(t *testing.T, kind plan.ClientTransport) {
		const max = 64
		p := plainPlan("E1")
		p.Limits.MaxConnections = max
		p.ClientTransport = kind
		fc := startFleet(t, p)
		f := &flooder{t: t, addr: strings.TrimPrefix(fc.url, "http://")}
		for range 2 * max {
			if !f.open(20 * time.Second) {
				t.Fatalf("connection %d of the flood was refused with no per-client cap", len(f.conns)+1)
			}
		}
		served(t, fc.url, http.MethodPost, "/v1/chat/completions", chat("m", "hello", `, "max_tokens": 2`))
		served(t, fc.url, http.MethodGet, "/metrics", "")
		if closed := f.closedByRouter(); closed < max {
			t.Errorf("the router closed %d of the flood's %d idle connections, want at least %d to stay under the cap of %d", closed, len(f.conns), max, max)
		}
	})
}

// The per-client cap refuses one client's connections beyond it, at once, while another
// client is served; a closed connection frees its place.
func TestPerClientConnectionCap(t *testing.T) {
	forClientTransports(t, func(t *testing.T, kind plan.ClientTransport) {
		const perClient = 8
		p := plainPlan("E1")
		p.Limits.MaxConnections, p.Limits.MaxConnectionsPerClient = 64, perClient
		p.ClientTransport = kind
		fc := startFleet(t, p)
		f := &flooder{t: t, addr: strings.TrimPrefix(fc.url, "http://")}
		for i := range perClient {
			if !f.open(20 * time.Second) {
				t.Fatalf("connection %d of %d was refused", i+1, perClient)
			}
		}
		for range 3 {
			if f.open(20 * time.Second) {
				t.Fatalf("connection %d from one client was answered past the cap of %d", len(f.conns), perClient)
			}
		}
		served(t, fc.url, http.MethodPost, "/v1/chat/completions", chat("m", "hello", `, "max_tokens": 2`))
		served(t, fc.url, http.MethodGet, "/metrics", "")
		f.conns[0].Close()
		f.conns = f.conns[1:]
		wait.For(t, "a closed connection's place freed", func() bool { return f.open(20 * time.Second) })
	})
}

// A request with both Content-Length and Transfer-Encoding gets its answer with
// Connection: close, and the request smuggled behind its chunked body in the same write
// is never served.
func TestContentLengthWithTransferEncodingClosesConnection(t *testing.T) {
	forClientTransports(t, func(t *testing.T, kind plan.ClientTransport) {
		p := plainPlan("E1")
		p.ClientTransport = kind
		fc := startFleet(t, p)
		c, err := net.Dial("tcp", strings.TrimPrefix(fc.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(wait.Timeout))
		// A front end that frames by Content-Length forwards 38 bytes of body; the router
		// frames by the chunks and would find GET /v1/models next.
		smuggled := "GET /v1/models HTTP/1.1\r\nHost: r\r\n\r\n"
		body := "0\r\n\r\n" + smuggled
		if _, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Length: "+strconv.Itoa(len(body))+
			"\r\nTransfer-Encoding: chunked\r\n\r\n"+body); err != nil {
			t.Fatal(err)
		}
		all, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("reading the answers: %v (the connection stayed open); got:\n%s", err, all)
		}
		answers := strings.Count(string(all), "HTTP/1.1 ")
		if answers != 1 || !strings.Contains(string(all), "Connection: close") {
			t.Fatalf("got %d answers on the connection, want 1 with Connection: close:\n%s", answers, all)
		}
		if strings.Contains(string(all), `"object":"list"`) {
			t.Fatalf("the smuggled GET /v1/models was served:\n%s", all)
		}
	})
}

// An idle keep-alive connection costs the router a bounded amount of memory, the figure
// clientconn.go states: the serving goroutine's stack and the server's buffers.
func TestIdleConnectionCost(t *testing.T) {
	forClientTransports(t, func(t *testing.T, kind plan.ClientTransport) {
		const n, bound = 200, 32 << 10
		p := plainPlan("E1")
		p.ClientTransport = kind
		fc := startFleet(t, p)
		f := &flooder{t: t, addr: strings.TrimPrefix(fc.url, "http://")}
		f.open(20 * time.Second) // the first connection pays for lazily built state
		before := goMemory()
		for range n {
			if !f.open(20 * time.Second) {
				t.Fatal("a connection was refused")
			}
		}
		per := (goMemory() - before) / n
		t.Logf("%d bytes of Go memory per idle keep-alive connection", per)
		if per > bound {
			t.Errorf("an idle connection costs %d bytes, want at most %d", per, bound)
		}
	})
}

// goMemory is the heap and stacks in use after a collection.
func goMemory() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
