package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
)

// shortServer serves echo with the timeouts made short.
func shortServer(t *testing.T, tune func(*Server)) string {
	t.Helper()
	addr, _ := servers(t, http.HandlerFunc(echo), func(s *Server) {
		s.ReadHeaderTimeout, s.IdleTimeout = 200*time.Millisecond, 400*time.Millisecond
		if tune != nil {
			tune(s)
		}
	})
	return addr
}

// closedWithin reports whether the server closes c within d, reading what it sends.
func closedWithin(c net.Conn, d time.Duration) (bool, []byte) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout()), b
}

// A head that trickles in is closed at ReadHeaderTimeout, whatever the pace; so is a
// connection that sends nothing.
func TestHeaderTimeoutClosesSlowloris(t *testing.T) {
	addr := shortServer(t, nil)
	for _, first := range []string{"", "GET / HTTP/1.1\r\nHost: h\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if first == "" {
			if closed, b := closedWithin(c, wait.Timeout); !closed || len(b) > 0 {
				t.Errorf("a silent connection after %v: closed %v, sent %q; want closed at the 200ms header timeout", wait.Timeout, closed, b)
			}
			continue
		}
		_, _ = io.WriteString(c, first)
		// The head trickles until the server closes the connection: a server that
		// counted its timeout from the last byte would never close it.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := io.WriteString(c, "X-A: b\r\n"); err != nil {
					return
				}
			}
		}()
		if closed, b := closedWithin(c, wait.Timeout); !closed || len(b) > 0 {
			t.Errorf("head %q trickled for %v: closed %v, sent %q; want closed at the 200ms header timeout without an answer", first, wait.Timeout, closed, b)
		}
	}
}

// A keep-alive connection left idle is closed at IdleTimeout, and one in use is not.
func TestIdleTimeoutClosesIdle(t *testing.T) {
	addr := shortServer(t, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for range 5 { // busier than the idle timeout: kept
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a connection in use was closed: %v", err)
		}
		_, _ = io.ReadAll(resp.Body)
		time.Sleep(100 * time.Millisecond)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait.Timeout))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("an idle connection after %v: %v, want closed at the 400ms idle timeout", wait.Timeout, err)
	}
}

// A head over MaxHeaderBytes is answered 431 and closed.
func TestHeadOverLimitIs431(t *testing.T) {
	addr := shortServer(t, func(s *Server) { s.MaxHeaderBytes = 8 << 10 })
	raw := "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n"
	a := parse(t, exchange(t, addr, []byte(raw)), nil)
	if len(a) != 1 || a[0].Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("got %v, want one 431", a)
	}
}

// Connections each holding a head just under MaxHeaderBytes, and idle ones, cost a
// bounded amount of memory each: the head's bytes (textproto keeps the line it reads)
// and the connection's 4 KiB buffers and goroutine.
func TestConnectionMemoryBound(t *testing.T) {
	const n, maxHead = 100, 32 << 10
	const headBound, idleBound = 4*maxHead + 32<<10, 32 << 10
	addr, _ := servers(t, http.HandlerFunc(echo), func(s *Server) { s.MaxHeaderBytes = maxHead })
	measure := func(open func(net.Conn)) int64 {
		before := goMemory()
		for range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			open(c)
		}
		time.Sleep(200 * time.Millisecond) // the server reads what was sent
		return (goMemory() - before) / n
	}
	head := measure(func(c net.Conn) {
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\nX-Big: "+strings.Repeat("a", maxHead-100))
	})
	idle := measure(func(c net.Conn) {
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
	})
	t.Logf("per connection: %d bytes with a %d-byte head pending, %d bytes idle (both sides in this process)", head, maxHead, idle)
	if head > headBound {
		t.Errorf("a connection with a pending head costs %d bytes, want at most %d", head, headBound)
	}
	if idle > idleBound {
		t.Errorf("an idle connection costs %d bytes, want at most %d", idle, idleBound)
	}
}

func goMemory() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// FuzzServeConn sends arbitrary bytes to a connection: the server must not panic, what
// it sends must parse as responses, and, where net/http's server serves the same bytes
// and the requests are of the kinds both accept, the statuses and bodies agree.
func FuzzServeConn(f *testing.F) {
	for _, raw := range agreeCases {
		if len(raw) < 4096 {
			f.Add([]byte(raw))
		}
	}
	ours, theirs := servers(f, http.HandlerFunc(echo), func(s *Server) { s.MaxHeaderBytes = 4 << 10 })
	f.Fuzz(func(t *testing.T, raw []byte) {
		ms := methods(raw)
		a := parse(t, exchange(t, ours, raw), ms)
		if !comparable(raw) {
			return
		}
		b := parse(t, exchange(t, theirs, raw), ms)
		if len(a) != len(b) {
			t.Fatalf("%d answers, net/http's server %d:\nours %v\nnet/http's %v", len(a), len(b), a, b)
		}
		for i := range a {
			if a[i].Status != b[i].Status || a[i].Body != b[i].Body {
				t.Fatalf("answer %d: ours %d %q, net/http's %d %q", i, a[i].Status, a[i].Body, b[i].Status, b[i].Body)
			}
		}
	})
}

// comparable reports whether every request in raw is of a kind both servers treat
// alike: the ones this server refuses where net/http's serves (docs/differences.md)
// are not, nor heads near the header limit (net/http counts its read-ahead differently).
func comparable(raw []byte) bool {
	if len(raw) > 2<<10 {
		return false
	}
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return true
		}
		if req.URL.Host != "" || req.Host == "" || req.ProtoMajor != 1 {
			return false
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return true
		}
	}
}

// A head that trickles in while the server drains is still closed at ReadHeaderTimeout:
// Shutdown returns then, not at the end of its context.
func TestShutdownClosesSlowlorisHead(t *testing.T) {
	var srv *Server
	addr := shortServer(t, func(s *Server) { srv = s })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := io.WriteString(c, "X-A: b\r\n"); err != nil {
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond) // the head has begun
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a trickling head: %v after %v, want nil within the 200ms header timeout", err, time.Since(start))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v with a trickling head, want about the 200ms header timeout", d)
	}
}
