package slo

import (
	"bytes"
	"time"
)

// Stream measures one streamed (SSE) response for the learned estimates of the bucket
// that served it: the time to its first event is an observed TTFT, and the mean gap
// between its events an observed inter-token time. Serving creates one per streamed
// request to a bucket that learns, passes it every body write, and calls Done when the
// response ended well. It keeps four numbers, whatever the response's size.
//
// A Stream is used by one goroutine.
type Stream struct {
	est         *Estimates
	start       time.Time
	first, last time.Time
	events      int
	clock       func() time.Time
}

// NewStream starts measuring a response to a request that arrived at start, for est; nil
// when est does not learn, and every method of a nil *Stream does nothing. clock is the
// time source; nil is time.Now.
func NewStream(est *Estimates, start time.Time, clock func() time.Time) *Stream {
	if !est.Learns() {
		return nil
	}
	if clock == nil {
		clock = time.Now
	}
	return &Stream{est: est, start: start, clock: clock}
}

var (
	dataPrefix = []byte("data:")
	doneEvent  = []byte("data: [DONE]")
)

// Write notes a chunk of the response body: the SSE events it starts ("data:" lines),
// leaving out the closing [DONE], which carries no token.
func (s *Stream) Write(b []byte) {
	if s == nil {
		return
	}
	n := bytes.Count(b, dataPrefix) - bytes.Count(b, doneEvent)
	if n <= 0 {
		return
	}
	now := s.clock()
	if s.events == 0 {
		s.first = now
	}
	s.last = now
	s.events += n
}

// Done records what the response showed: its TTFT once it had an event, and its mean
// inter-token time once it had two.
func (s *Stream) Done() {
	if s == nil || s.events == 0 {
		return
	}
	s.est.ObserveTTFT(s.first.Sub(s.start))
	if s.events > 1 {
		s.est.ObserveInterToken(s.last.Sub(s.first) / time.Duration(s.events-1))
	}
}
