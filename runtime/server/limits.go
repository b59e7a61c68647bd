package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/request"
)

// activeSet caps the chat requests served at once and tracks them, so shutdown can wait
// for the last error events after cutting streams.
type activeSet struct {
	slots chan struct{}
	wg    sync.WaitGroup
}

func newActiveSet(n int) *activeSet {
	if n <= 0 {
		n = 1024
	}
	return &activeSet{slots: make(chan struct{}, n)}
}

// enter claims a slot, or reports false when every slot is taken: the caller answers
// 503 at once rather than queueing, so a flood cannot hold memory and goroutines.
func (a *activeSet) enter() bool {
	select {
	case a.slots <- struct{}{}:
		a.wg.Add(1)
		return true
	default:
		return false
	}
}

func (a *activeSet) leave() {
	<-a.slots
	a.wg.Done()
}

// waitIdle waits until no request is active or d has passed.
func (a *activeSet) waitIdle(d time.Duration) {
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// preallocMax is the most readBody allocates before the body's bytes arrive.
const preallocMax = 1 << 20

// readBody reads a client's request body within limits.body_read_ms and the body size
// cap, in one allocation when the client declares its length: the body is read once and
// every later step (decoding, dispatch to both PD halves) works on these bytes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *httpError) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.timeouts.BodyRead))
	timedOut := false
	defer func() {
		// After a timeout the deadline stays passed and the connection closes after the
		// answer: the server would otherwise wait for the rest of the body to keep it.
		if !timedOut {
			_ = rc.SetReadDeadline(time.Time{})
		}
	}()
	if r.ContentLength > request.MaxBodyBytes {
		return nil, &httpError{status: http.StatusRequestEntityTooLarge, code: codeBodyTooLarge, msg: fmt.Sprintf("request body exceeds %d bytes", request.MaxBodyBytes)}
	}
	// The declared length is trusted only once the client has sent the first
	// preallocMax bytes: a client declaring 32 MiB and sending nothing costs little.
	want := 0
	if r.ContentLength > 0 {
		want = int(r.ContentLength) + 1 // +1: reading EOF needs no growth
	}
	buf := make([]byte, 0, min(max(want, 512), preallocMax))
	body := http.MaxBytesReader(w, r.Body, request.MaxBodyBytes)
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				return nil, &httpError{status: http.StatusRequestEntityTooLarge, code: codeBodyTooLarge, msg: fmt.Sprintf("request body exceeds %d bytes", request.MaxBodyBytes)}
			case errors.Is(err, os.ErrDeadlineExceeded):
				timedOut = true
				w.Header().Set("Connection", "close")
				s.metrics.timeouts.WithLabelValues("client", dispatch.PhaseBodyRead).Inc()
				return nil, &httpError{status: http.StatusRequestTimeout, code: codeBodyTimeout, msg: fmt.Sprintf("request body not received within %v", s.timeouts.BodyRead)}
			}
			return nil, &httpError{status: http.StatusBadRequest, code: codeInvalidRequest, msg: "reading request body: " + err.Error()}
		}
		if len(buf) == cap(buf) {
			if want > cap(buf) {
				buf = append(make([]byte, 0, want), buf...)
			} else {
				buf = append(buf, 0)[:len(buf)] // grow
			}
		}
	}
}

func newBreaker(b plan.Breaker, clock func() time.Time) *engine.Breaker {
	threshold, open := breakerSettings(b)
	return engine.NewBreaker(threshold, open, clock)
}

// breakerSettings are b's threshold and open period, with the defaults for unset ones.
func breakerSettings(b plan.Breaker) (threshold int, open time.Duration) {
	threshold, open = b.FailureThreshold, time.Duration(b.OpenMS)*time.Millisecond
	if threshold <= 0 {
		threshold = 5
	}
	if open <= 0 {
		open = 10 * time.Second
	}
	return threshold, open
}
