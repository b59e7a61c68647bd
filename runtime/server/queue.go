package server

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/queue"
	"github.com/routerkit/router/runtime/request"
)

// activeSet holds the routed requests inside the router and tracks them, so shutdown can
// wait for the last error events after cutting streams. It caps them before their bodies
// are read, so a flood cannot hold memory and goroutines: limits.max_concurrent_requests
// without a queue; with one, twice that (served, and being read) plus queue.size per
// model of the plan the router started with. Past that cap a request is answered at
// once. Its queue (runtime/queue) then holds the slots of limits.max_concurrent_requests,
// the rate limit and the waiting.
type activeSet struct {
	slots   chan struct{}
	wg      sync.WaitGroup
	queue   *queue.Queue
	metrics *queueMetrics
}

func newActiveSet(p *plan.Plan) *activeSet {
	n := p.Limits.MaxConcurrentRequests
	if n <= 0 {
		n = 1024
	}
	cfg := queue.Config{Size: p.Queue.Size, Timeout: time.Duration(p.Queue.TimeoutMS) * time.Millisecond, MaxConcurrent: n}
	if r := p.RateLimit; r != nil {
		cfg.Rate = &queue.Rate{PerSecond: r.RequestsPerSecond, Burst: r.Burst}
	}
	m := newQueueMetrics()
	m.zero(p)
	held := n // without a queue, as many as are served: the rest are answered at once
	if cfg.Size > 0 {
		// Served, waiting, and as many again being read and prepared, so that a model's
		// full line is answered by the queue (429 queue_full, counted per model).
		held = 2*n + cfg.Size*len(p.Models)
	}
	return &activeSet{slots: make(chan struct{}, held), queue: queue.New(cfg, m), metrics: m}
}

// enter claims a place in the router, or reports false when every one is taken.
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

// full is the answer to a request that finds every place in the router taken.
func (a *activeSet) full() error {
	if a.queue.Queues() {
		return &queue.Error{Reason: queue.Full, Size: a.queue.Size(), Limit: cap(a.slots), RetryAfter: time.Second}
	}
	return &queue.Error{Reason: queue.OverCapacity, Limit: cap(a.slots), RetryAfter: time.Second}
}

// changed tells the queue that the plan or the fleet changed: waiters try again, and
// the new plan's models have their series.
func (a *activeSet) changed(p *plan.Plan) {
	a.metrics.zero(p)
	a.queue.NotifyAll()
}

// admit takes a slot in the queue for a prepared request, waiting for one in its model's
// line, and runs selection; when selection finds only admission rejections and requests
// may wait, it waits for its model's capacity to change and runs selection again from
// the start. The returned ticket, nil when none was taken, gives the slot back (leave)
// when the request is done.
func (s *generation) admit(r *http.Request, p *request.Prepared, d *record) (bucket.Selection, *queue.Ticket, error) {
	q := s.active.queue
	t, err := q.Enter(r.Context(), p.Model.Name)
	if err != nil {
		d.Error = err.Error()
		return bucket.Selection{}, nil, err
	}
	for {
		sel, err := s.route(r, p, d)
		d.QueuedMS = float64(t.Waited().Microseconds()) / 1000
		if be, ok := errors.AsType[*bucket.Error](err); err == nil || !q.Queues() || !ok || be.Reason != bucket.AdmissionRejected {
			if err == nil {
				t.Served()
			}
			return sel, t, err
		}
		if err := t.Wait(r.Context()); err != nil {
			d.Error = err.Error()
			d.QueuedMS = float64(t.Waited().Microseconds()) / 1000
			return bucket.Selection{}, t, err
		}
	}
}

// leave gives back the slot of an admitted request's ticket (nil: none was taken).
func leave(t *queue.Ticket) {
	if t != nil {
		t.Leave()
	}
}

// refuseArrival answers a request that found every place in the router taken.
func (s *generation) refuseArrival(rec *recorder, d *record) {
	err := s.active.full()
	d.Error = err.Error()
	answer.WriteErr(rec, err)
}

// queueMetrics are runtime/queue's series; the model label is a configured model's name.
type queueMetrics struct {
	depth    *prometheus.GaugeVec
	wait     *prometheus.HistogramVec
	rejected *prometheus.CounterVec
	limited  *prometheus.CounterVec
}

// rejectReasons are the values of router_queue_rejections_total's reason label.
var rejectReasons = []queue.Reason{queue.Full, queue.Timeout, queue.ClientGone, queue.OverCapacity, queue.RateLimited}

func newQueueMetrics() *queueMetrics {
	return &queueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "router_queue_depth", Help: "Requests waiting in the model's queue for capacity.",
		}, []string{"model"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "router_queue_wait_seconds", Help: "Time requests waited in the queue, all their waits together, by the requests that were then selected.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"model"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_queue_rejections_total", Help: "Requests the queue answered instead of serving, by reason: full (429), timeout (408), client_gone, over_capacity (503, no queue), rate_limited (429, no queue).",
		}, []string{"model", "reason"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "router_rate_limited_total", Help: "Requests that found the rate limit's bucket empty on arrival (they waited, or without a queue were answered 429).",
		}, []string{"model"}),
	}
}

func (m *queueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.depth, m.wait, m.rejected, m.limited}
}

// zero creates every model's series at zero.
func (m *queueMetrics) zero(p *plan.Plan) {
	for _, model := range p.Models {
		m.depth.WithLabelValues(model.Name)
		m.wait.WithLabelValues(model.Name)
		m.limited.WithLabelValues(model.Name)
		for _, r := range rejectReasons {
			m.rejected.WithLabelValues(model.Name, string(r))
		}
	}
}

func (m *queueMetrics) Depth(model string, n int) { m.depth.WithLabelValues(model).Set(float64(n)) }

func (m *queueMetrics) Waited(model string, d time.Duration) {
	m.wait.WithLabelValues(model).Observe(d.Seconds())
}

func (m *queueMetrics) Rejected(model string, r queue.Reason) {
	m.rejected.WithLabelValues(model, string(r)).Inc()
}

func (m *queueMetrics) RateLimited(model string) { m.limited.WithLabelValues(model).Inc() }

// capacityChanged tells the queue that an engine's load report arrived or that it
// recovered: its model's head of line runs selection again.
func (c *Server) capacityChanged(engineID string) {
	if w := c.reg.Get(engineID); w != nil {
		c.active.queue.Notify(w.Model())
	}
}

// previewQueue adds to x what the queue would do with the request.
func (s *generation) previewQueue(x *explain.Explanation) *explain.Explanation {
	rejected := x.Error != nil && x.Error.Code == string(bucket.AdmissionRejected)
	pv := s.active.queue.Preview(x.Model, rejected)
	x.Queue = &pv
	return x
}
