// Package redistest runs a real redis-server on a free loopback port for tests of the
// shared binding store. The binary must be installed (Debian package redis-server, `make
// redis`): a test that needs it fails without it rather than skipping, so a machine
// missing it cannot pass the suite silently.
package redistest

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process that keeps nothing on disk.
type Server struct {
	t    testing.TB
	port int
	proc *Process // nil while stopped
}

// Start runs redis-server on a free port of 127.0.0.1 until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t}
	s.start()
	s.port = s.proc.port
	t.Cleanup(s.Stop)
	return s
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *Server) start() {
	s.t.Helper()
	p, err := Run(s.port)
	if err != nil {
		s.t.Fatalf("%v: the shared-binding tests need a real Redis", err)
	}
	s.proc = p
}

// Stop kills the server and waits for it to exit; a stopped server stays stopped.
func (s *Server) Stop() {
	if s.proc == nil {
		return
	}
	s.proc.Stop()
	s.proc = nil
}

// Restart starts a stopped server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	if s.proc != nil {
		s.t.Fatal("redistest: Restart of a running server")
	}
	s.start()
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// String names the server in messages.
func (s *Server) String() string { return fmt.Sprintf("redis-server %s", s.Addr()) }
