package tui

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/routerkit/router/internal/wait"
)

// syncBuffer is a bytes.Buffer the program's renderer can write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProgram is the smoke test: the real bubbletea program, with a fake fetch that
// alternates the fixtures on a 10ms interval, draws the engines, keeps polling, switches
// views on tab and quits on q.
func TestProgram(t *testing.T) {
	states := []*State{readState(t, "state-1.json"), readState(t, "state-2.json")}
	var polls atomic.Int64
	fetch := func(context.Context) (*State, error) {
		return states[polls.Add(1)%2], nil
	}
	in, typeKeys := io.Pipe()
	defer typeKeys.Close()
	out := &syncBuffer{}
	p := tea.NewProgram(New(Options{Fetch: fetch, Source: "fake", Interval: 10 * time.Millisecond}),
		tea.WithInput(in), tea.WithOutput(out), tea.WithWindowSize(80, 24), tea.WithoutSignalHandler())

	type result struct {
		m   tea.Model
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := p.Run()
		done <- result{m, err}
	}()
	t.Cleanup(p.Kill) // ends the program when the test fails before q
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		if !wait.Until(ok) {
			t.Fatalf("no %s after %v; output so far:\n%s", what, wait.Timeout, out.String())
		}
	}
	waitFor("engine rows", func() bool { return strings.Contains(out.String(), "saturated") })
	waitFor("polls after the first", func() bool { return polls.Load() >= 3 })
	if _, err := typeKeys.Write([]byte("\t")); err != nil {
		t.Fatal(err)
	}
	waitFor("buckets view", func() bool { return strings.Contains(out.String(), "ERR/s") })
	if _, err := typeKeys.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Run: %v", r.err)
		}
		if got := r.m.(Model).view; got != viewBuckets {
			t.Errorf("final view = %s, want buckets", viewNames[got])
		}
	case <-time.After(wait.Timeout):
		t.Fatal("q did not quit the program")
	}
}
