// Package redistest runs a real redis-server on a free loopback port for tests of the
// shared binding store. The binary must be installed (Debian package redis-server, `make
// redis`): a test that needs it fails without it rather than skipping, so a machine
// missing it cannot pass the suite silently.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process that keeps nothing on disk.
type Server struct {
	t    testing.TB
	bin  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs redis-server on a free port of 127.0.0.1 until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not installed (%v): the shared-binding tests need a real Redis; run `make redis` (apt-get install -y redis-server)", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{t: t, bin: bin, port: port}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *Server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning",
		// DEBUG SLEEP stalls the server, for the tests of stalls (Redis 7 and later).
		"--enable-debug-command", "local")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("redis-server on port %d exited at start: %v", s.port, err)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %d did not answer: %v", s.port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server and waits for it to exit; a stopped server stays stopped.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts a stopped server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
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
