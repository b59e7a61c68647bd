package server

import (
	"container/list"
	"crypto/tls"
	"net"
	"net/http"
	"sync"

	"golang.org/x/net/netutil"
)

// Client connections are a shared resource: one client must not be able to hold them
// all. Three rules keep them shared, as nginx (limit_conn, keepalive reuse) and haproxy
// (idle-close-on-response) do:
//
//   - a cap on open connections (limits.max_connections), netutil.LimitListener: more
//     wait in the kernel's backlog until one closes;
//   - a cap per client address (limits.max_connections_per_client): a connection beyond
//     it is closed as soon as it is accepted;
//   - when the open connections reach the reaping mark (15/16 of the cap), each new
//     connection closes the longest-idle keep-alive connection, so idle sockets give way
//     to a client with something to ask instead of filling the cap until IdleTimeout.
//
// Closing an idle keep-alive connection is what every server does at its idle timeout;
// a client that sends a request on it in the same instant sees the connection reset
// (net/http's Transport retries such a request when it is idempotent or its body was
// never written).
//
// An idle connection costs the router about 20 KiB of Go memory (the serving goroutine's
// stack, the server's 4 KiB read and write buffers and the connection's state;
// TestIdleConnectionCost measures it and bounds it at 32 KiB), plus the kernel's socket
// buffers: the default 4,096 connections are about 80 MiB at most.

// reapMark is the number of open connections from which each new one closes the oldest
// idle one: 15/16 of the cap, so the reaping starts before the cap makes Accept wait.
func reapMark(max int) int { return max - max/16 }

// clientListener counts accepted connections per client address, refuses the excess
// over the per-address cap, and keeps the idle ones in the order they became idle for
// reaping. Its ConnState method is the client server's ConnState hook (http.Server's,
// or h1.Server's, which reports the same transitions).
type clientListener struct {
	net.Listener
	perAddr int // 0: no per-address cap
	mark    int // 0: no reaping

	mu     sync.Mutex
	open   int
	byAddr map[string]int
	idle   *list.List // of *clientConn, the longest idle first
}

// newClientListener wraps ln with the connection caps; max or perAddr 0 leaves that cap
// off.
func newClientListener(ln net.Listener, max, perAddr int) *clientListener {
	l := &clientListener{Listener: ln, perAddr: perAddr, byAddr: map[string]int{}, idle: list.New()}
	if max > 0 {
		l.Listener = netutil.LimitListener(ln, max)
		l.mark = reapMark(max)
	}
	return l
}

func (l *clientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := hostOf(c.RemoteAddr())
		if cc := l.admit(c, addr); cc != nil {
			return cc, nil
		}
		_ = c.Close()
	}
}

// admit counts c against its address and returns it wrapped, or nil when its address
// already holds perAddr connections. Past the reaping mark it closes the longest idle
// connection.
func (l *clientListener) admit(c net.Conn, addr string) *clientConn {
	l.mu.Lock()
	if l.perAddr > 0 && l.byAddr[addr] >= l.perAddr {
		l.mu.Unlock()
		return nil
	}
	l.byAddr[addr]++
	l.open++
	var reap *clientConn
	if l.mark > 0 && l.open > l.mark && l.idle.Len() > 0 {
		reap = l.idle.Remove(l.idle.Front()).(*clientConn)
		reap.idleAt = nil
	}
	l.mu.Unlock()
	if reap != nil {
		_ = reap.Close()
	}
	return &clientConn{Conn: c, l: l, addr: addr}
}

// ConnState follows the server's view of each connection: an idle keep-alive connection
// joins the back of the reaping order, and leaves it when a request starts on it or it
// closes.
func (l *clientListener) ConnState(c net.Conn, state http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok { // a TLS listener wraps the accepted connection
		c = tc.NetConn()
	}
	cc, ok := c.(*clientConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cc.idleAt != nil {
		l.idle.Remove(cc.idleAt)
		cc.idleAt = nil
	}
	if state == http.StateIdle && !cc.closed {
		cc.idleAt = l.idle.PushBack(cc)
	}
}

// clientConn is an accepted connection that frees its address's count once when closed.
type clientConn struct {
	net.Conn
	l    *clientListener
	addr string

	// Guarded by l.mu.
	idleAt *list.Element // its place in l.idle while idle
	closed bool
}

// Close frees the connection's counts once, however often it is called.
func (c *clientConn) Close() error {
	l := c.l
	l.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.idleAt != nil {
			l.idle.Remove(c.idleAt)
			c.idleAt = nil
		}
		l.open--
		if l.byAddr[c.addr]--; l.byAddr[c.addr] == 0 {
			delete(l.byAddr, c.addr)
		}
	}
	l.mu.Unlock()
	return c.Conn.Close()
}

// hostOf is a connection's client address without its port: the key of the
// per-address cap.
func hostOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
