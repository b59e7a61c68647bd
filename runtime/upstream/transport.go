// Package upstream holds the router's HTTP/1.1 transport to engines. It sends a request
// and reads its response in the caller's goroutine, on a pooled keep-alive connection.
//
// net/http's Transport gives each connection a reading and a writing goroutine: a
// request is handed to the writer, the response headers come back from the reader, and
// the reader is woken again when the body ends. On a router those hand-offs are most of
// what a request costs beyond the system calls: at one client, with two cores, each is a
// thread woken from sleep. Sending and reading in the caller's goroutine cut the router's
// CPU per request by 10–12% at 1, 8 and 64 clients (docs/benchmarks.md). What the
// reader goroutine also did, noticing that an engine closed an idle connection, is a
// non-blocking peek when the connection is taken from the pool.
//
// A request is written whole before its response is read. An engine that answers
// before reading the whole request (a 413, say) and closes the connection, as uvicorn
// does, still has its answer read after the write fails; one that neither reads nor
// closes holds the request until the router's first-byte deadline ends it.
//
// Requests this transport does not speak (https, a proxy from the environment) go to
// the fallback, a net/http Transport.
package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/rawtcp"
)

// Defaults for a zero field of Transport.
const (
	DefaultMaxIdlePerHost = 256
	DefaultIdleTimeout    = 90 * time.Second
	// bufferSize is net/http's own for a connection's reader and writer.
	bufferSize = 4 << 10
	// max1xx is how many informational responses a request may get before its final
	// one, as in net/http.
	max1xx = 5
)

// Transport is an http.RoundTripper for plain-HTTP engines. Its exported fields are set
// before its first use.
type Transport struct {
	// Dial opens a connection to host:port.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy, when set, picks a proxy for a request (http.ProxyFromEnvironment); a
	// request with one goes to Fallback.
	Proxy func(*http.Request) (*url.URL, error)
	// Fallback carries what this transport does not: https and proxied requests.
	Fallback http.RoundTripper
	// MaxIdlePerHost bounds the idle connections kept per engine; more are closed.
	MaxIdlePerHost int
	// IdleTimeout is how long an idle connection is kept.
	IdleTimeout time.Duration

	mu        sync.Mutex
	idle      map[string][]*conn
	lastSweep time.Time
}

// MaxHeaderBytes bounds an engine's response headers (1xx included), read into memory
// whole.
const MaxHeaderBytes = 1 << 20

// errHeadersTooLong is returned for response headers over MaxHeaderBytes.
var errHeadersTooLong = errors.New("upstream: engine response headers exceed 1 MiB")

// conn is one connection to an engine with its buffers.
type conn struct {
	net.Conn
	addr      string
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
	peeker    peeker
	// expire fails the connection's reads and writes at once, when a request's context
	// ends: made once per connection, not per request.
	expire func()
	// headerLeft is how many more bytes the reader may take from the connection while
	// response headers are read; -1 when a body is read.
	headerLeft int
	// pend makes the writer's next flush hand its bytes to pending rather than to the
	// connection: a request written whole in that flush is written by the first read of
	// its answer (rawtcp.WriteRead), which werr then holds the error of. Only a request
	// none of which went before (wrote): an engine may answer what it has of a request,
	// and WriteRead would not see an answer that came before it.
	pend    bool
	wrote   bool
	pending []byte
	werr    error
}

// pendWriter is the connection as its buffered writer sees it (see conn.pend). The bytes
// pending are the writer's own buffer, which nothing writes to before the read.
type pendWriter struct{ c *conn }

func (w pendWriter) Write(p []byte) (int, error) {
	if w.c.pend {
		w.c.pend, w.c.pending = false, p
		return len(p), nil
	}
	w.c.wrote = true
	return w.c.Conn.Write(p)
}

// read reads from the connection, writing what is pending first.
func (c *conn) read(p []byte) (n int, err error) {
	if c.pending == nil {
		return c.Conn.Read(p)
	}
	w := c.pending
	c.pending = nil
	n, c.werr, err = rawtcp.WriteRead(c.Conn, w, p)
	return n, err
}

// limited is the connection as its reader sees it: bounded while headers are read.
type limited struct{ c *conn }

func (l limited) Read(p []byte) (int, error) {
	c := l.c
	if c.headerLeft < 0 {
		return c.read(p)
	}
	if c.headerLeft == 0 {
		return 0, errHeadersTooLong
	}
	n, err := c.read(p[:min(len(p), c.headerLeft)])
	c.headerLeft -= n
	return n, err
}

// longAgo is a deadline that has passed: set on a connection, it fails its reads and
// writes at once.
var longAgo = time.Unix(1, 0)

// errTooMany1xx is returned for an engine that sends informational responses without end.
var errTooMany1xx = errors.New("upstream: too many 1xx informational responses")

// RoundTrip sends req and reads its response headers. The body is read from the
// connection as the caller reads it; the connection returns to the pool when the body
// has been read to its end, and is closed when the body is closed before that, the
// engine asked to close it, or req's context ends.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.Carries(req) {
		return t.Fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	c, err := t.get(ctx, hostPort(req.URL))
	if err != nil {
		closeBody(req)
		return nil, err
	}
	// A context that ends fails the connection's reads and writes; the connection is
	// then closed rather than reused.
	stop := context.AfterFunc(ctx, c.expire)
	resp, err := c.roundTrip(req)
	if err != nil {
		stop()
		c.Close()
		return nil, ended(ctx, err)
	}
	b := &body{rc: resp.Body, t: t, c: c, ctx: ctx, stop: stop, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.done()
	}
	resp.Body = b
	return resp, nil
}

// Carries reports whether the transport sends req itself rather than through the
// fallback: a plain-HTTP request the environment sends through no proxy. The requests it
// carries get no informational (1xx) answers: it reads past them.
func (t *Transport) Carries(req *http.Request) bool {
	return req.URL.Scheme == "http" && !t.proxied(req)
}

// proxied reports whether the environment sends req through a proxy.
func (t *Transport) proxied(req *http.Request) bool {
	if t.Proxy == nil {
		return false
	}
	u, err := t.Proxy(req)
	return err != nil || u != nil
}

// roundTrip writes req and reads the final response's headers. A request's headers and
// an in-memory body go out in one write, made by the first read of the answer (see
// conn.pend); a larger Body in a second, a writev of its parts.
func (c *conn) roundTrip(req *http.Request) (*http.Response, error) {
	// Flushed even after a failed write: a body longer than its declared length fails
	// req.Write after the declared bytes, which may still sit in the buffer, and the
	// engine answers only once it has them all.
	c.wrote, c.werr = false, nil
	werr := writeRequest(reqWriter{c.bw, c}, req)
	c.pend = werr == nil && !c.wrote
	if ferr := c.bw.Flush(); werr == nil {
		werr = ferr
	}
	c.pend = false
	c.headerLeft = MaxHeaderBytes
	defer func() { c.headerLeft, c.pending = -1, nil }()
	for range max1xx + 1 {
		resp, err := readResponse(c.br, req)
		if werr == nil {
			werr = c.werr
		}
		switch {
		case err != nil && werr != nil:
			return nil, werr // the engine closed the connection on the request
		case err != nil:
			return nil, err
		case resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols:
			// An engine may answer before it has read the whole request (a 413, say):
			// its answer is the request's, and the connection is not reused.
			resp.Close = resp.Close || werr != nil
			return resp, nil
		}
	}
	return nil, errTooMany1xx
}

// ended names the cause of an I/O error that the end of ctx provoked, as net/http's
// transport does: a deadline of the caller's, rather than the connection's timeout.
func ended(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// hostPort is u's host with the port HTTP defaults to.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// get takes an idle connection to addr that is still open, or dials one.
func (t *Transport) get(ctx context.Context, addr string) (*conn, error) {
	now := time.Now()
	t.mu.Lock()
	t.sweepLocked(now)
	for l := t.idle[addr]; len(l) > 0; l = t.idle[addr] {
		c := l[len(l)-1]
		l[len(l)-1] = nil
		t.idle[addr] = l[:len(l)-1]
		t.mu.Unlock()
		if c.peeker.alive() {
			return c, nil
		}
		c.Close()
		t.mu.Lock()
	}
	t.mu.Unlock()
	nc, err := t.Dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	nc = rawtcp.Wrap(nc) // reads and writes without waking sysmon (see rawtcp)
	c := &conn{Conn: nc, addr: addr, headerLeft: -1}
	c.bw = bufio.NewWriterSize(pendWriter{c}, bufferSize)
	c.br = bufio.NewReaderSize(limited{c}, bufferSize)
	c.peeker.init(nc)
	c.expire = func() { _ = c.SetDeadline(longAgo) }
	return c, nil
}

// put returns a connection whose response was read to its end to the pool.
func (t *Transport) put(c *conn) {
	if c.br.Buffered() > 0 { // bytes beyond the response: the connection is confused
		c.Close()
		return
	}
	c.idleSince = time.Now()
	t.mu.Lock()
	l := t.idle[c.addr]
	if len(l) >= t.maxIdlePerHost() {
		t.mu.Unlock()
		c.Close()
		return
	}
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	t.idle[c.addr] = append(l, c)
	t.mu.Unlock()
}

// sweepLocked closes the connections idle for longer than the idle timeout, at most
// twice per timeout. Each engine's list is oldest first.
func (t *Transport) sweepLocked(now time.Time) {
	timeout := t.idleTimeout()
	if now.Sub(t.lastSweep) < timeout/2 {
		return
	}
	t.lastSweep = now
	for addr, l := range t.idle {
		n := 0
		for n < len(l) && now.Sub(l[n].idleSince) > timeout {
			l[n].Close()
			n++
		}
		if n == len(l) {
			delete(t.idle, addr)
		} else if n > 0 {
			t.idle[addr] = append(l[:0], l[n:]...)
		}
	}
}

// CloseIdleConnections closes the pooled connections and the fallback's.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, l := range idle {
		for _, c := range l {
			c.Close()
		}
	}
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func (t *Transport) maxIdlePerHost() int {
	if t.MaxIdlePerHost > 0 {
		return t.MaxIdlePerHost
	}
	return DefaultMaxIdlePerHost
}

func (t *Transport) idleTimeout() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return DefaultIdleTimeout
}

// body is a response body on its connection. The connection goes back to the pool as
// soon as the body is read to its end, as net/http does, so that the next request can
// take it before this one's handler has finished.
type body struct {
	rc   io.ReadCloser
	t    *Transport
	c    *conn
	ctx  context.Context
	stop func() bool
	keep bool
	eof  bool // read to its end: the connection is no longer this body's
	err  error
}

func (b *body) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.done()
	case err != nil:
		err = ended(b.ctx, err)
		b.err = err
	}
	return n, err
}

// done ends the body at its end: the connection is reused when the engine keeps it
// open and the request's context has not ended.
func (b *body) done() {
	b.eof = true
	if b.stop() && b.keep {
		b.t.put(b.c)
	} else {
		b.c.Close()
	}
	b.c = nil
}

// Close closes the connection unless the body was read to its end.
func (b *body) Close() error {
	if b.c == nil {
		return nil
	}
	b.stop()
	err := b.c.Close()
	b.c = nil
	if b.err == nil {
		b.err = net.ErrClosed
	}
	return err
}
