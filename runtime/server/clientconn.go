package server

import (
	"context"
	"net"
	"sync"
	"time"
)

// Client connections' read deadlines are kept by the router rather than by the runtime.
// net/http moves a connection's read deadline three or four times per request (the
// header deadline, its end, the body-read deadline, the idle deadline), and every move
// re-sorts a runtime timer and, when that timer becomes the earliest, wakes the thread
// sleeping in the network poller: at one client that was about 1% of the router's CPU.
// Here a deadline further ahead than two sweeps is only noted; a sweep every watchTick
// puts the noted deadlines that have passed on their sockets, so a read blocked past its
// deadline fails as before, at most one tick late. A nearer deadline, such as the past
// one net/http sets to interrupt a read, goes to the socket at once.
const watchTick = 100 * time.Millisecond

// clientListener wraps accepted connections in clientConns, and with a cap (limits.
// max_connections) accepts at most that many open connections; more wait in the
// kernel's backlog until one closes.
type clientListener struct {
	net.Listener
	sem   chan struct{} // nil: no cap
	watch *connWatch
}

func newClientListener(ln net.Listener, max int, watch *connWatch) *clientListener {
	l := &clientListener{Listener: ln, watch: watch}
	if max > 0 {
		l.sem = make(chan struct{}, max)
	}
	return l
}

func (l *clientListener) Accept() (net.Conn, error) {
	if l.sem != nil {
		l.sem <- struct{}{}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		if l.sem != nil {
			<-l.sem
		}
		return nil, err
	}
	cc := &clientConn{Conn: c, l: l}
	l.watch.add(cc)
	return cc, nil
}

// clientConn is an accepted connection whose far read deadlines are noted for the sweep.
type clientConn struct {
	net.Conn
	l      *clientListener
	closed sync.Once

	mu       sync.Mutex
	due      int64 // the noted read deadline in Unix nanoseconds; 0 for none
	onSocket bool  // the socket holds a read deadline
}

func (c *clientConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.due = 0
	if !t.IsZero() && time.Until(t) < 2*watchTick {
		c.onSocket = true
		return c.Conn.SetReadDeadline(t)
	}
	if !t.IsZero() {
		c.due = t.UnixNano()
	}
	if c.onSocket {
		c.onSocket = false
		return c.Conn.SetReadDeadline(time.Time{})
	}
	return nil
}

func (c *clientConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// Close frees the connection's slot once, however often it is called.
func (c *clientConn) Close() error {
	c.closed.Do(func() {
		c.l.watch.remove(c)
		if c.l.sem != nil {
			<-c.l.sem
		}
	})
	return c.Conn.Close()
}

// expire puts a noted deadline that has passed by now on the socket.
func (c *clientConn) expire(now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.due != 0 && c.due <= now {
		_ = c.Conn.SetReadDeadline(longAgo)
		c.due, c.onSocket = 0, true
	}
}

// longAgo is a deadline that has passed: on a socket, it fails reads at once.
var longAgo = time.Unix(1, 0)

// connWatch holds the open client connections for the sweep.
type connWatch struct {
	mu    sync.Mutex
	conns map[*clientConn]struct{}
}

func newConnWatch() *connWatch { return &connWatch{conns: map[*clientConn]struct{}{}} }

func (w *connWatch) add(c *clientConn) {
	w.mu.Lock()
	w.conns[c] = struct{}{}
	w.mu.Unlock()
}

func (w *connWatch) remove(c *clientConn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

// run sweeps every watchTick until ctx ends.
func (w *connWatch) run(ctx context.Context) {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			w.sweep(now.UnixNano())
		}
	}
}

func (w *connWatch) sweep(now int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		c.expire(now)
	}
}
