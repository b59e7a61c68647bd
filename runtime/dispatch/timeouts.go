package dispatch

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/upstream"
)

// Timeouts are the plan's dispatch deadlines as durations, defaults filled in for a
// plan built without the compiler. BodyRead bounds the client's body, which the HTTP edge
// reads.
type Timeouts struct {
	Connect, FirstByte, StreamIdle, Total, PrefillStatus, BodyRead time.Duration
}

// TimeoutsOf returns t as durations.
func TimeoutsOf(t plan.Timeouts) Timeouts {
	ms := func(v, def int) time.Duration {
		if v <= 0 {
			v = def
		}
		return time.Duration(v) * time.Millisecond
	}
	return Timeouts{
		Connect:       ms(t.ConnectMS, 5000),
		FirstByte:     ms(t.FirstByteMS, 300_000),
		StreamIdle:    ms(t.StreamIdleMS, 60_000),
		Total:         ms(t.TotalMS, 1_800_000),
		PrefillStatus: ms(t.PrefillStatusMS, 30_000),
		BodyRead:      ms(t.BodyReadMS, 30_000),
	}
}

// NewTransport is the production transport. With plan.TransportRouter (or empty),
// plain-HTTP engines are spoken to by upstream.Transport in the dispatching goroutine, on
// pooled keep-alive connections (up to 256 idle per engine), and https or proxied engines
// by a net/http Transport pooled the same way; with plan.TransportNetHTTP that net/http
// Transport takes every engine. Both dial with the configured connect timeout. https
// engines are always spoken to by the net/http Transport, with tlsConf (engine_tls: CAs,
// client certificate) when not nil: upstream.Transport speaks plain HTTP only.
func NewTransport(t Timeouts, kind plan.EngineTransport, tlsConf *tls.Config) http.RoundTripper {
	dial := (&net.Dialer{Timeout: t.Connect, KeepAlive: 30 * time.Second}).DialContext
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsConf != nil {
		tr.TLSClientConfig = tlsConf.Clone()
	}
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
	tr.DialContext = dial
	// The engine's response headers are bounded as upstream.Transport bounds them.
	tr.MaxResponseHeaderBytes = upstream.MaxHeaderBytes
	if kind == plan.TransportNetHTTP {
		return tr
	}
	return &upstream.Transport{Dial: dial, Proxy: tr.Proxy, Fallback: tr, MaxIdlePerHost: 256, IdleTimeout: tr.IdleConnTimeout}
}

// deadlines enforce one dispatch's first-byte, stream-idle and total deadlines with one
// timer. Each cancels the dispatch context with a timeout Error as its cause, so
// every reader of the context (the transport, the proxy's error handler, the stream
// guard) sees which deadline passed.
//
// The timer is armed once, for the earliest time any deadline could pass (the first
// byte, the total, or the stream-idle time should the headers come at once); when it
// fires, it cancels if a deadline passed and otherwise re-arms itself for the deadline
// that now comes first. A request that ends before then never touches the timer again.
// A timer set, moved and stopped several times per request made the runtime wake an
// idle thread each time the move made it the earliest (runtime.wakeNetPoller), which at
// one client cost more than the timers themselves.
type deadlines struct {
	mu      sync.Mutex
	waiting bool // a PD decode half waits for its prefill: no first-byte deadline yet
	started bool // the response headers arrived: no first-byte deadline any more
	idle    bool // the body flows: the stream-idle deadline applies
	stopped bool // the dispatch is over: the timer must not be re-armed
	// lastRead is when the stream last delivered data, in nanoseconds since base. Reads
	// only store it; the timer, when it fires, finds how long the stream was quiet.
	lastRead atomic.Int64
	base     time.Time // when the body could start to flow
	firstAt  time.Time // the first-byte deadline, once not waiting
	totalAt  time.Time
	cancel   context.CancelCauseFunc
	w        *engine.Worker
	Stage    plan.Role
	first    time.Duration
	idleFor  time.Duration
	totalIn  time.Duration
	timer    *time.Timer
	wakeAt   time.Time // when the timer fires
}

// startDeadlines starts a dispatch's deadlines. A PD decode half (pf set) waits for the
// KV hand-over from its prefill before it can answer, so its first-byte deadline starts
// once the prefill's status is known; until then timeouts.prefill_status_ms bounds it.
func (dp *Dispatcher) startDeadlines(ctx context.Context, cancel context.CancelCauseFunc, w *engine.Worker, stage plan.Role, pf *prefillStatus) *deadlines {
	now := time.Now()
	d := &deadlines{cancel: cancel, w: w, Stage: stage, first: dp.timeouts.FirstByte, idleFor: dp.timeouts.StreamIdle, totalIn: dp.timeouts.Total,
		base: now, firstAt: now.Add(dp.timeouts.FirstByte), totalAt: now.Add(dp.timeouts.Total), waiting: pf != nil}
	d.mu.Lock()
	defer d.mu.Unlock()
	next := d.nextLocked(now) // the lock is held: a timer that fires at once waits for d.timer
	d.timer, d.wakeAt = time.AfterFunc(next, d.check), now.Add(next)
	if pf != nil {
		go func() {
			select {
			case <-pf.done:
				d.mu.Lock()
				if d.waiting {
					d.waiting = false
					now := time.Now()
					d.firstAt = now.Add(d.first)
					if !d.stopped {
						d.armLocked(now)
					}
				}
				d.mu.Unlock()
			case <-ctx.Done():
			}
		}()
	}
	return d
}

// nextLocked is how long from now the timer may sleep: until the earliest deadline that
// could pass, counting the stream-idle one from now while the headers are awaited.
func (d *deadlines) nextLocked(now time.Time) time.Duration {
	next := d.totalAt.Sub(now)
	switch {
	case d.idle:
		quiet := now.Sub(d.base) - time.Duration(d.lastRead.Load())
		next = min(next, d.idleFor-quiet)
	case !d.started && !d.waiting:
		next = min(next, d.firstAt.Sub(now), d.idleFor)
	}
	return max(next, 0)
}

// armLocked sets the timer for the earliest deadline that could pass.
func (d *deadlines) armLocked(now time.Time) {
	next := d.nextLocked(now)
	d.timer.Reset(next)
	d.wakeAt = now.Add(next)
}

// check runs when the timer fires: it cancels the dispatch when a deadline passed, or
// re-arms the timer.
func (d *deadlines) check() {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return
	}
	now := time.Now()
	var err *Error
	switch {
	case !now.Before(d.totalAt):
		err = &Error{Kind: Timeout, Stage: d.Stage, Worker: d.w, Phase: PhaseTotal, After: d.totalIn}
	case d.idle && now.Sub(d.base)-time.Duration(d.lastRead.Load()) >= d.idleFor:
		err = &Error{Kind: Timeout, Stage: d.Stage, Worker: d.w, Phase: PhaseStreamIdle, After: d.idleFor}
	case !d.started && !d.waiting && !now.Before(d.firstAt):
		err = &Error{Kind: Timeout, Stage: d.Stage, Worker: d.w, Phase: PhaseFirstByte, After: d.first}
	default:
		d.armLocked(now)
	}
	d.mu.Unlock()
	if err != nil {
		d.cancel(err)
	}
}

// gotHeaders ends the first-byte deadline: the response headers arrived.
func (d *deadlines) gotHeaders() {
	d.mu.Lock()
	d.started = true
	d.mu.Unlock()
}

// headers starts the stream-idle deadline: the response body may flow. The timer is
// only moved when it was set past the idle deadline, as it is when a PD decode half
// waited for its prefill's status after its headers.
func (d *deadlines) headers() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.idle = true
	d.base = time.Now()
	if !d.stopped && d.wakeAt.After(d.base.Add(d.idleFor)) {
		d.armLocked(d.base)
	}
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
	d.timer.Stop()
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
