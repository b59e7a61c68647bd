// Package logsink holds the writer under the router's logs. Request lines, one per
// request, are batched: writing each at once costs a system call per request and, on a
// pipe to a log collector, a wake-up of the reader. Every other line is written at once,
// after the batched lines before it, so the order of lines is kept and a warning is
// never held back. nginx's `access_log ... buffer= flush=` and Envoy's access-log flush
// interval make the same trade.
package logsink

import (
	"io"
	"sync"
	"time"
)

// DefaultBatch is the most bytes of request lines kept before they are written.
const DefaultBatch = 64 << 10

// Sink serializes log lines to one writer. Its zero value is not usable; call New.
type Sink struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	batch  int
	every  time.Duration
	timer  *time.Timer // flushes a batch every at the latest after its first line
	armed  bool
	closed bool
}

// New returns a sink writing to w that keeps up to batch bytes of batched lines for at
// most every. every ≤ 0 turns batching off: batched lines are written at once too.
func New(w io.Writer, batch int, every time.Duration) *Sink {
	s := &Sink{w: w, batch: batch, every: every}
	s.timer = time.AfterFunc(time.Hour, func() { _ = s.Flush() })
	s.timer.Stop()
	return s
}

// Write writes p at once, after the batched lines that came before it. slog's handlers
// call it once per record.
func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) == 0 {
		return s.w.Write(p)
	}
	s.buf = append(s.buf, p...)
	if err := s.flushLocked(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Batched returns the writer for request lines: a line waits in memory until the batch
// is full, every has passed since the batch's first line, a line is written at once,
// or the sink is flushed.
func (s *Sink) Batched() io.Writer {
	if s.every <= 0 {
		return s
	}
	return batched{s}
}

type batched struct{ s *Sink }

// Write keeps a copy of p (the caller reuses its buffer) in the batch.
func (b batched) Write(p []byte) (int, error) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.w.Write(p)
	}
	if len(s.buf) > 0 && len(s.buf)+len(p) > s.batch {
		if err := s.flushLocked(); err != nil {
			return 0, err
		}
	}
	s.buf = append(s.buf, p...)
	if !s.armed {
		s.armed = true
		s.timer.Reset(s.every)
	}
	return len(p), nil
}

// Flush writes the batched lines.
func (s *Sink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

// Close flushes the batch; lines written after it are written at once. The server's
// last lines (draining, drained) come before it.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.timer.Stop()
	return s.flushLocked()
}

// flushLocked writes the batch in one call. A batch the writer refuses is dropped: the
// log's destination is gone, and keeping the lines would only grow the buffer.
func (s *Sink) flushLocked() error {
	if s.armed {
		s.armed = false
		s.timer.Stop()
	}
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.w.Write(s.buf)
	if cap(s.buf) > 4*s.batch {
		s.buf = nil // one huge line does not stay in memory
	} else {
		s.buf = s.buf[:0]
	}
	return err
}
