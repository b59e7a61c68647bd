package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Process is one redis-server on a port of 127.0.0.1 that keeps nothing on disk, started
// by Run for code outside tests (bench/quality) and by Start for tests.
type Process struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Run starts redis-server on port of 127.0.0.1 (0 picks a free one) and waits until it
// answers, at most 10 s.
func Run(port int) (*Process, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed (%w): run `make redis` (apt-get install -y redis-server)", err)
	}
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	p := &Process{port: port, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning",
		// DEBUG SLEEP stalls the server, for the tests of store stalls (Redis 7 and later).
		"--enable-debug-command", "local")
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("redis-server on port %d exited at start: %w", port, err)
		default:
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("redis-server on port %d did not answer: %w", port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Addr is the server's HOST:PORT.
func (p *Process) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// Stop kills the server and waits for it to exit.
func (p *Process) Stop() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
