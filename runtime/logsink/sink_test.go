package logsink

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder keeps each Write the sink makes, as the writer under it sees them.
type recorder struct {
	mu     sync.Mutex
	writes []string
	fail   bool
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return 0, errors.New("stderr closed")
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

func TestBatchedLinesWaitAndKeepTheirOrder(t *testing.T) {
	var w recorder
	s := New(&w, 1<<10, time.Hour)
	b := s.Batched()
	line := []byte("req 1\n")
	b.Write(line)
	copy(line, "XXXXX") // the caller reuses its buffer: the sink kept a copy
	b.Write([]byte("req 2\n"))
	if got := w.got(); len(got) != 0 {
		t.Fatalf("batched lines written before their time: %q", got)
	}
	s.Write([]byte("warn\n"))
	want := []string{"req 1\nreq 2\nwarn\n"}
	if got := w.got(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q: an immediate line goes out after the batch, in one write", got, want)
	}
	s.Write([]byte("info\n"))
	if got := w.got(); len(got) != 2 || got[1] != "info\n" {
		t.Fatalf("an immediate line with nothing batched: %q", got)
	}
}

func TestFullBatchIsWritten(t *testing.T) {
	var w recorder
	s := New(&w, 20, time.Hour)
	b := s.Batched()
	for i := range 5 {
		fmt.Fprintf(b, "line %d\n", i) // 7 bytes each: two fit in a batch of 20
	}
	want := []string{"line 0\nline 1\n", "line 2\nline 3\n"}
	if got := w.got(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.got(); len(got) != 3 || got[2] != "line 4\n" {
		t.Fatalf("Close did not write the last batch: %q", got)
	}
	b.Write([]byte("late\n"))
	if got := w.got(); len(got) != 4 || got[3] != "late\n" {
		t.Fatalf("a line after Close is written at once: %q", got)
	}
}

// TestBatchIsWrittenWithinTheInterval: a batched line is written when the interval since
// the batch's first line has passed, not before, and the next batch arms the timer again.
// The bubble's clock moves only when every goroutine in it is blocked, so the interval is
// exact.
func TestBatchIsWrittenWithinTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 20 * time.Millisecond
		var w recorder
		s := New(&w, 1<<10, every)
		for _, line := range []string{"req\n", "again\n"} {
			before := len(w.got())
			s.Batched().Write([]byte(line))
			time.Sleep(every - time.Nanosecond)
			synctest.Wait()
			if got := w.got(); len(got) != before {
				t.Fatalf("%q written before the interval passed: %q", line, got)
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if got := w.got(); len(got) != before+1 || got[before] != line {
				t.Fatalf("after the interval: %q, want %q written", got, line)
			}
		}
	})
}

func TestNoBatchingWritesAtOnce(t *testing.T) {
	var w recorder
	s := New(&w, 1<<10, 0)
	s.Batched().Write([]byte("req\n"))
	if got := w.got(); len(got) != 1 {
		t.Fatalf("with batching off a line waits: %q", got)
	}
}

func TestRefusedBatchIsDropped(t *testing.T) {
	w := recorder{fail: true}
	s := New(&w, 1<<10, time.Hour)
	s.Batched().Write([]byte("req\n"))
	if err := s.Flush(); err == nil {
		t.Fatal("the writer's error was not returned")
	}
	w.fail = false
	s.Write([]byte("next\n"))
	if got := w.got(); len(got) != 1 || got[0] != "next\n" {
		t.Fatalf("the refused batch was kept: %q", got)
	}
}

func TestConcurrentLinesStayWhole(t *testing.T) {
	var out bytes.Buffer
	var w lockedBuffer
	w.b = &out
	s := New(&w, 256, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if i%50 == 0 {
					fmt.Fprintf(s, "warn %d %d\n", g, i)
				} else {
					fmt.Fprintf(s.Batched(), "req %d %d\n", g, i)
				}
			}
		}()
	}
	wg.Wait()
	s.Close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, l := range lines {
		var kind string
		var g, i int
		if n, _ := fmt.Sscanf(l, "%s %d %d", &kind, &g, &i); n != 3 {
			t.Fatalf("torn line %q", l)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
