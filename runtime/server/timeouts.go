package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// timeouts are the plan's dispatch deadlines as durations, defaults filled in for a
// plan built without the compiler.
type timeouts struct {
	connect, firstByte, streamIdle, total, prefillStatus, bodyRead time.Duration
}

func timeoutsOf(t plan.Timeouts) timeouts {
	ms := func(v, def int) time.Duration {
		if v <= 0 {
			v = def
		}
		return time.Duration(v) * time.Millisecond
	}
	return timeouts{
		connect:       ms(t.ConnectMS, 5000),
		firstByte:     ms(t.FirstByteMS, 300_000),
		streamIdle:    ms(t.StreamIdleMS, 60_000),
		total:         ms(t.TotalMS, 1_800_000),
		prefillStatus: ms(t.PrefillStatusMS, 30_000),
		bodyRead:      ms(t.BodyReadMS, 30_000),
	}
}

// newTransport is the production transport: pooled for a router (many idle connections
// per engine), with the configured connect timeout.
func newTransport(t timeouts) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
	tr.DialContext = (&net.Dialer{Timeout: t.connect, KeepAlive: 30 * time.Second}).DialContext
	return tr
}

// deadlines run one dispatch's timers. Each cancels the dispatch context with a
// timeout dispatchError as its cause, so every reader of the context (the transport, the
// proxy's error handler, the stream guard) sees which deadline passed. One timer is the
// first-byte deadline until the response headers arrive and the stream-idle deadline
// after; the other is the total deadline.
type deadlines struct {
	mu      sync.Mutex
	started bool // the response headers arrived
	armed   bool // phase runs the first-byte deadline (a PD decode half's waits for its prefill)
	idle    bool // phase runs the stream-idle deadline
	fired   bool // the first-byte deadline passed as the headers arrived
	stopped bool // the dispatch is over: the timers must not be re-armed
	// lastRead is when the stream last delivered data, in nanoseconds since base. Reads
	// only store it; the idle timer, when it fires, re-arms itself for the rest of the
	// idle time if data came meanwhile, so a stream of many small chunks does not reset
	// a timer for each.
	lastRead atomic.Int64
	base     time.Time
	cancel   context.CancelCauseFunc
	w        *engine.Worker
	stage    plan.Role
	first    time.Duration
	idleFor  time.Duration
	totalIn  time.Duration
	phase    *time.Timer
	total    *time.Timer
}

// startDeadlines starts a dispatch's timers. A PD decode half (pf set) waits for the KV
// hand-over from its prefill before it can answer, so its first-byte deadline starts
// once the prefill's status is known; until then timeouts.prefill_status_ms bounds it.
func (s *Server) startDeadlines(ctx context.Context, cancel context.CancelCauseFunc, w *engine.Worker, stage plan.Role, pf *prefillStatus) *deadlines {
	d := &deadlines{cancel: cancel, w: w, stage: stage, first: s.timeouts.firstByte, idleFor: s.timeouts.streamIdle, totalIn: s.timeouts.total}
	d.phase = time.AfterFunc(d.first, d.phasePassed)
	d.armed = true
	if pf != nil {
		d.phase.Stop()
		d.armed = false
		go func() {
			select {
			case <-pf.done:
				d.mu.Lock()
				if !d.started {
					d.phase.Reset(d.first)
					d.armed = true
				}
				d.mu.Unlock()
			case <-ctx.Done():
			}
		}()
	}
	d.total = time.AfterFunc(d.totalIn, d.totalPassed)
	return d
}

// phasePassed cancels the dispatch when the first-byte or the stream-idle deadline
// passes, whichever the phase timer was running.
func (d *deadlines) phasePassed() {
	d.mu.Lock()
	phase, after := phaseFirstByte, d.first
	if d.idle {
		phase, after = phaseStreamIdle, d.idleFor
		if quiet := time.Since(d.base) - time.Duration(d.lastRead.Load()); quiet < d.idleFor {
			if !d.stopped {
				d.phase.Reset(d.idleFor - quiet)
			}
			d.mu.Unlock()
			return
		}
	}
	d.mu.Unlock()
	d.cancel(&dispatchError{kind: failTimeout, stage: d.stage, worker: d.w, phase: phase, after: after})
}

func (d *deadlines) totalPassed() {
	d.cancel(&dispatchError{kind: failTimeout, stage: d.stage, worker: d.w, phase: phaseTotal, after: d.totalIn})
}

// gotHeaders stops the first-byte timer for good.
func (d *deadlines) gotHeaders() {
	d.mu.Lock()
	d.started = true
	d.fired = !d.phase.Stop() && d.armed
	d.mu.Unlock()
}

// headers starts the idle timer: the response body may flow. When the first-byte
// deadline passed meanwhile, the dispatch is already cancelled and the timer stays the
// first-byte one, so that the cancellation names the right phase.
func (d *deadlines) headers() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fired {
		return
	}
	d.idle = true
	d.base = time.Now()
	d.phase.Reset(d.idleFor)
}

// progress notes that a chunk of the body arrived, which restarts the idle time.
func (d *deadlines) progress() {
	if d.idle {
		d.lastRead.Store(int64(time.Since(d.base)))
	}
}

func (d *deadlines) stop() {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.phase.Stop()
	d.total.Stop()
}

// idleReader restarts the idle timer on every read that returned data.
type idleReader struct {
	io.ReadCloser
	d *deadlines
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.d.progress()
	}
	return n, err
}
