package upstream

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/routerkit/router/internal/rawengine"
)

// countingConn counts the writes to its connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int32
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// post sends body to u through tr and returns what the engine echoed.
func post(t *testing.T, tr http.RoundTripper, u string, body *Body) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = body.Len()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	return string(b)
}

// A Body reaches the engine whole through this transport and through net/http's (the
// engine_transport net_http switch), and one larger than the buffer is written from its
// parts: the headers' flush and a write per part, where net/http's copy made a write of
// every 32 kB.
func TestBodyParts(t *testing.T) {
	e := startEngine(t, echo)
	var writes atomic.Int32
	tr := &Transport{Fallback: http.DefaultTransport, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return countingConn{c, &writes}, err
	}}
	for _, size := range []int{0, 100, 3000, 1 << 20} {
		head, tail := bytes.Repeat([]byte("h"), size), []byte(`,"tail":1}`)
		want := string(head) + string(tail)
		writes.Store(0)
		if got := post(t, tr, e.URL, NewBody(head, tail)); got != want {
			t.Fatalf("%d bytes: the engine got %d bytes, want %d", size, len(got), len(want))
		}
		if n := writes.Load(); n > 3 {
			t.Errorf("%d bytes: %d writes, want at most 3", size, n)
		}
		if got := post(t, http.DefaultTransport, e.URL, NewBody(head, tail)); got != want {
			t.Fatalf("%d bytes through net/http: the engine got %d bytes, want %d", size, len(got), len(want))
		}
	}
}

// A Body longer than the request's Content-Length goes through net/http's copy, which
// sends the declared length and fails the write (the engine's answer is still read).
func TestBodyLongerThanItsLength(t *testing.T) {
	e := startEngine(t, echo)
	body := NewBody(bytes.Repeat([]byte("x"), 1<<20))
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, e.URL, body)
	req.ContentLength = body.Len() - 1
	resp, err := newTransport().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || int64(len(got)) != req.ContentLength || !resp.Close {
		t.Errorf("the engine got %d bytes of a body declared %d and a byte longer (%v), connection closed after: %v", len(got), req.ContentLength, err, resp.Close)
	}
}

// BenchmarkLongBody sends a 620 kB body (a 128k-token conversation) through the transport
// as a Body, written from its bytes, and as an opaque reader, which net/http copies
// through a 32 kB buffer a write at a time; the engine, in this process, reads both
// alike, so the difference in the process's CPU per request is the transport's.
func BenchmarkLongBody(b *testing.B) {
	u := rawengine.Start(b, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false)
	head := bytes.Repeat([]byte("x"), 620_000)
	for _, c := range []struct {
		name string
		body func() io.ReadCloser
	}{
		{"body", func() io.ReadCloser { return NewBody(head) }},
		{"reader", func() io.ReadCloser { return io.NopCloser(bytes.NewReader(head)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := newTransport()
			b.SetBytes(int64(len(head)))
			b.ReportAllocs()
			cpu0 := rusageCPU(b)
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, u, c.body())
				req.ContentLength = int64(len(head))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			b.ReportMetric(float64((rusageCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// rusageCPU is the process's user and system CPU time, steadier than wall time on a
// shared machine.
func rusageCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
