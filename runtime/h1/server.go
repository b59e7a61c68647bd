// Package h1 serves HTTP/1.1 to the router's clients without net/http's server.
//
// net/http's server costs about twice per request what the router's own work does
// (docs/benchmarks.md, "Per-request CPU with Qwen3"): a background read started and
// stopped around every handler, and two read deadlines set per request for
// ReadHeaderTimeout and IdleTimeout. This server keeps what a server facing hostile
// clients needs and pays for it once: the read that notices a client leaving is also the
// wait for the connection's next request (so nothing is started and stopped per
// request), and the header and idle timeouts are enforced by one sweeping goroutine per
// server instead of deadlines on every connection. Requests are parsed by net/http's own
// http.ReadRequest, then checked as net/http's server checks them.
//
// It speaks HTTP/1.x only; the router keeps net/http's server for TLS (HTTP/2 by ALPN)
// and as the switch back (client_transport: net_http).
package h1

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.1 on listeners. Its exported fields mean what http.Server's of
// the same names mean; set them before Serve.
type Server struct {
	Handler     http.Handler
	BaseContext func(net.Listener) context.Context
	// ReadHeaderTimeout bounds a request's head from its first byte (from the accept for
	// a connection's first request); IdleTimeout bounds the wait for the next request.
	// Both are enforced to within a sweep period: a tenth of the shorter, at most a
	// second. Zero is no limit.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// MaxHeaderBytes caps a request's head; zero is net/http's default, 1 MiB.
	MaxHeaderBytes int
	// ConnState is called with the transitions net/http's server reports: StateNew at
	// accept, StateActive when a request's first bytes arrive, StateIdle after a response
	// on a connection kept alive, StateClosed at the end.
	ConnState func(net.Conn, http.ConnState)
	ErrorLog  *log.Logger

	mu        sync.Mutex
	listeners map[*net.Listener]struct{}
	conns     map[*conn]struct{}
	sweeping  bool
	stop      chan struct{} // closed when the sweeper is to stop
	inShut    atomic.Bool
	// now is the sweeper's clock (UnixNano), stamped on connections as their phase
	// changes: reading it costs an atomic load where time.Now costs a clock read.
	now atomic.Int64

	// The wait tick (see armWait): the connections whose pending read is armed, and
	// whether the tick is set.
	waitMu   sync.Mutex
	waiters  []*conn
	ticking  bool
	waitTick *time.Timer
}

// maxHeaderBytes is the cap on a request's head.
func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return http.DefaultMaxHeaderBytes
}

// Serve accepts connections on ln and serves each in a goroutine of its own until
// Shutdown or Close, when it returns http.ErrServerClosed; it closes ln.
func (s *Server) Serve(ln net.Listener) error {
	defer ln.Close() // as net/http: Serve owns ln, even when called after Shutdown
	if !s.track(&ln, true) {
		return http.ErrServerClosed
	}
	defer s.track(&ln, false)
	base := context.Background()
	if s.BaseContext != nil {
		if base = s.BaseContext(ln); base == nil {
			panic("h1: BaseContext returned a nil context")
		}
	}
	base = context.WithValue(base, http.ServerContextKey, s)
	var delay time.Duration
	for {
		rw, err := ln.Accept()
		if err != nil {
			if s.inShut.Load() {
				return http.ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// As net/http: a temporary failure (out of descriptors) waits and retries.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logf("h1: accept error: %v; retrying in %v", err, delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := s.newConn(rw)
		if !s.add(c) {
			_ = rw.Close()
			return http.ErrServerClosed
		}
		if s.ConnState != nil {
			s.ConnState(rw, http.StateNew)
		}
		go c.serve(base)
	}
}

// track adds or removes a listener; adding starts the sweeper and fails after Shutdown.
func (s *Server) track(ln *net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.listeners, ln)
		return true
	}
	if s.inShut.Load() {
		return false
	}
	if s.listeners == nil {
		s.listeners = map[*net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
		s.stop = make(chan struct{})
	}
	s.listeners[ln] = struct{}{}
	if !s.sweeping {
		s.sweeping = true
		s.now.Store(time.Now().UnixNano())
		go s.sweep(s.stop)
	}
	return true
}

func (s *Server) add(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShut.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) remove(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// sweepPeriod is how often the sweeper looks at the connections: a tenth of the shorter
// timeout, between 10 ms and a second.
func (s *Server) sweepPeriod() time.Duration {
	d := time.Second
	for _, t := range []time.Duration{s.ReadHeaderTimeout, s.IdleTimeout} {
		if t > 0 {
			d = min(d, t/10)
		}
	}
	return max(d, 10*time.Millisecond)
}

// sweep advances the clock and closes the connections whose head or idle wait ran past
// its timeout, until stop is closed.
func (s *Server) sweep(stop chan struct{}) {
	t := time.NewTicker(s.sweepPeriod())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.now.Store(now.UnixNano())
			s.expire(now.UnixNano())
		}
	}
}

// expire closes the connections overdue at now.
func (s *Server) expire(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		limit := time.Duration(0)
		ph := c.phase.Load()
		switch ph {
		case phaseNew, phaseHead:
			limit = s.ReadHeaderTimeout
		case phaseIdle:
			limit = s.IdleTimeout
		}
		if limit > 0 && now-c.since.Load() > int64(limit) {
			c.kill(ph)
		}
	}
}

// Shutdown stops accepting, closes idle connections and waits for the active ones to
// finish their responses (sent with Connection: close) and close, or for ctx to end,
// whose error it then returns. Serve returns http.ErrServerClosed.
//
// The sweeper runs on until no connection is left: a head that trickles in during the
// drain is still closed at ReadHeaderTimeout, so a hostile client cannot hold the drain
// to the end of ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeListeners()
	poll := time.Millisecond
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		if s.closeIdle() {
			s.stopSweep()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			poll = min(2*poll, 500*time.Millisecond)
			t.Reset(poll)
		}
	}
}

// Close stops accepting and closes every connection at once.
func (s *Server) Close() error {
	err := s.closeListeners()
	s.stopSweep()
	s.mu.Lock()
	for c := range s.conns {
		c.kill(c.phase.Load())
		_ = c.rwc.Close()
	}
	s.mu.Unlock()
	return err
}

// stopSweep stops the sweeper, once.
func (s *Server) stopSweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sweeping {
		s.sweeping = false
		close(s.stop)
	}
}

// closeListeners marks the server shut down and closes its listeners.
func (s *Server) closeListeners() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inShut.Store(true)
	var err error
	for ln := range s.listeners {
		if cerr := (*ln).Close(); cerr != nil && err == nil {
			err = cerr
		}
		delete(s.listeners, ln)
	}
	return err
}

// closeIdle closes the idle connections, and the new ones that have sent nothing for
// five seconds (as net/http), and reports whether none are left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := time.Now().Add(-5 * time.Second).UnixNano()
	for c := range s.conns {
		switch c.phase.Load() {
		case phaseIdle:
			c.kill(phaseIdle)
		case phaseNew:
			if c.since.Load() < old {
				c.kill(phaseNew)
			}
		}
	}
	return len(s.conns) == 0
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}
