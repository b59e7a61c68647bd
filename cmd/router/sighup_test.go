package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/sim"
)

// lockedBuffer is a log sink safe to read while the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeReloadsOnSIGHUP: SIGHUP makes `router serve` reload its config files; a
// broken config is logged with its errors and the running plan stays. The signals go to
// this test process, where serve runs in-process and has them registered.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	const fleetYAML = `engines:
  - {id: E1, url: "http://127.0.0.1:1", model: llama, role: plain}
  - {id: E2, url: "http://127.0.0.1:2", model: llama, role: plain}
models:
  llama:
    buckets: [{id: all, groups: {plain: {policy: {type: round_robin}}}}]
`
	p, err := compiler.CompileSources([]compiler.Source{{Name: "fleet.yaml", Data: []byte(fleetYAML)}})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := sim.SpecsFromPlan(p, sim.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range specs {
		specs[i].Addr = ""
	}
	fleet, err := sim.Start(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Close()
	config := func(ids ...string) string {
		var b strings.Builder
		b.WriteString("engines:\n")
		for _, id := range ids {
			fmt.Fprintf(&b, "  - {id: %s, url: %q, model: llama, role: plain}\n", id, fleet.Engine(id).URL())
		}
		b.WriteString("models:\n  llama:\n    buckets: [{id: all, groups: {plain: {policy: {type: round_robin}}}}]\n")
		return b.String()
	}
	path := filepath.Join(t.TempDir(), "router.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(config("E1"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"router", "serve", "--config", path, "--listen", addr}, &bytes.Buffer{}, logs)
	}()
	generation := func() uint64 {
		resp, err := http.Get("http://" + addr + "/admin/state")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		var st struct{ Generation uint64 }
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return st.Generation
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		if !wait.Until(cond) {
			t.Fatalf("timed out after %v waiting for %s; log:\n%s", wait.Timeout, what, logs)
		}
	}
	waitUntil("the router", func() bool { return generation() == 1 })

	write(config("E1", "E2"))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil("generation 2", func() bool { return generation() == 2 })

	write(strings.Replace(config("E1"), "role: plain", "role: plian", 1))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil("the refusal", func() bool { return strings.Contains(logs.String(), "reload refused") })
	if !strings.Contains(logs.String(), `role must be \"plain\", \"prefill\" or \"decode\"`) {
		t.Errorf("the refusal does not carry the compiler's error:\n%s", logs)
	}
	if g := generation(); g != 2 {
		t.Errorf("a refused reload changed the generation to %d", g)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != exitOK {
		t.Fatalf("serve exited %d:\n%s", code, logs)
	}
}
