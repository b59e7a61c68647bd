// Package queue holds the requests that wait for capacity: a bounded FIFO per model in
// front of the router's concurrency limit, its token-bucket rate limit and the engines'
// admission caps. It holds requests, never engines: a waiter that is let through runs
// selection again from the start, so it goes wherever capacity is when it leaves the
// queue (DESIGN.md §2.2).
//
// A request enters (Enter) and holds a slot of limits.max_concurrent_requests until it
// leaves (Ticket.Leave). When no slot or no rate token is free, or when a waiter of its
// model is already queued (a new arrival never overtakes a waiter of its model), it waits.
// When selection then finds only admission rejections, the request gives its slot back
// and waits again (Ticket.Wait) until its model's capacity changes: a request of that
// model finishes, a load report arrives, an engine joins or recovers, or the router
// reloads (Notify, NotifyAll). Only the head of a model's line re-runs selection on such
// an event; when it is served, the next one tries, so one event costs one selection.
//
// The semantics follow SGLang's router (sgl-router src/middleware.rs
// concurrency_limit_middleware and src/core/token_bucket.rs, sgl-project/sglang commit
// 07f5f7498b841022aabf2304b90165d6dc103ad5): a full queue is 429, a wait past the timeout
// 408, no queue 429 at once for the rate limit. docs/serve.md "Queueing and rate limits".
package queue

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Config is what the queue enforces.
type Config struct {
	// Size is how many requests may wait per model; 0 answers at once, as without a queue.
	Size int
	// Timeout is the longest a request waits, all its waits together.
	Timeout time.Duration
	// MaxConcurrent is how many requests hold a slot at once (limits.max_concurrent_requests).
	MaxConcurrent int
	// Rate, when set, is the token bucket every request takes one token from.
	Rate *Rate
	// Now is the clock of the token bucket and of wait times; nil is time.Now.
	Now func() time.Time
}

// Rate is a token bucket: PerSecond tokens refill it, up to Burst.
type Rate struct {
	PerSecond float64
	Burst     int
}

// Observer learns what the queue does, for metrics; its methods are called with the
// queue's lock held and must not call back into the queue.
type Observer interface {
	// Depth is the number of requests waiting for model after a change.
	Depth(model string, n int)
	// Waited is the whole wait of a request that waited and was then selected.
	Waited(model string, d time.Duration)
	// Rejected is a request answered by the queue instead of served.
	Rejected(model string, r Reason)
	// RateLimited is a request that found the rate limit's bucket empty on arrival.
	RateLimited(model string)
}

// Queue is the router's queue; one serves every model.
type Queue struct {
	cfg Config
	obs Observer

	mu      sync.Mutex
	running int
	seq     uint64
	lines   map[string]*line
	tokens  *bucket
	// refill wakes the queue when the next rate token is due and a waiter needs it.
	refill *time.Timer
}

// line is one model's waiters in arrival order.
type line struct {
	waiters []*waiter
	// epoch counts the model's capacity events, so a request that selection rejected
	// learns whether capacity changed while it was selecting.
	epoch uint64
	// probing is whether a request of this line, let through to try selection again
	// after admission rejected it, has not yet said how it went: until it does, the
	// rest of the line waits, so one capacity event costs one selection and nobody
	// overtakes it.
	probing bool
}

// waiter is a request waiting for its turn.
type waiter struct {
	seq   uint64
	paid  bool // back from selection (Ticket.Wait): its rate token is taken already
	stuck bool // rejected by admission: waits for its model's next capacity event
	ready chan struct{}
	let   bool   // let through: holds a slot (and its token)
	epoch uint64 // its model's capacity events when it was let through
}

// New returns a queue enforcing cfg, reporting to obs (nil: nobody).
func New(cfg Config, obs Observer) *Queue {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if obs == nil {
		obs = nopObserver{}
	}
	q := &Queue{cfg: cfg, obs: obs, lines: map[string]*line{}}
	if cfg.Rate != nil {
		q.tokens = newBucket(*cfg.Rate, cfg.Now())
	}
	return q
}

// Queues reports whether requests wait at all (queue.size > 0).
func (q *Queue) Queues() bool { return q.cfg.Size > 0 }

// Size is queue.size, the waiters a model may have.
func (q *Queue) Size() int { return q.cfg.Size }

// Waiting is how many requests wait for model.
func (q *Queue) Waiting(model string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l := q.lines[model]; l != nil {
		return len(l.waiters)
	}
	return 0
}

// Running is how many requests hold a slot.
func (q *Queue) Running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running
}

// Ticket is a request's place in the router: a slot while it is held, a place in its
// model's line while it waits.
type Ticket struct {
	q      *Queue
	model  string
	seq    uint64
	epoch  uint64 // the model's capacity events when the slot was last taken
	held   bool
	probe  bool // let through to try selection again: its line waits for the outcome
	queued bool // it waited in its line and was let through
	waited time.Duration
	// since is when the request first waited; its deadline counts from there.
	since time.Time
}

// Enter takes a slot for a request of model, waiting in the model's line when none is
// free or when others of its model wait already. It fails with an *Error: Full when the
// line is full (or there is no line), Timeout, ClientGone when ctx ends.
func (q *Queue) Enter(ctx context.Context, model string) (*Ticket, error) {
	q.mu.Lock()
	q.seq++
	t := &Ticket{q: q, model: model, seq: q.seq}
	l := q.lines[model]
	if (l == nil || len(l.waiters) == 0) && q.slotFree() {
		if q.takeToken() {
			q.running++
			t.held, t.epoch = true, q.epochOf(model)
			q.mu.Unlock()
			return t, nil
		}
		q.obs.RateLimited(model)
	}
	return t, q.wait(ctx, t, &waiter{seq: t.seq})
}

// Wait gives the slot back and waits for the model's capacity to change, after
// selection found only admission rejections; the request keeps its place in arrival
// order, ahead of later ones. It fails as Enter does. Call it only when Queues.
func (t *Ticket) Wait(ctx context.Context) error {
	q := t.q
	q.mu.Lock()
	if q.cfg.Size == 0 {
		q.mu.Unlock()
		return &Error{Reason: Full, Model: t.model}
	}
	q.release(t)
	q.endProbe(t)
	return q.wait(ctx, t, &waiter{seq: t.seq, paid: true, stuck: t.epoch == q.epochOf(t.model)})
}

// Served tells the queue that the request was selected: its wait, if any, is over, and
// after a request that waited for admission capacity, the next waiter of its model may
// find some left.
func (t *Ticket) Served() {
	if !t.queued {
		return
	}
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	q.obs.Waited(t.model, t.waited)
	if !t.probe {
		return
	}
	q.endProbe(t)
	q.unstick(t.model)
	q.pump()
}

// Leave gives the slot back when the request is done: its model has capacity again.
// After a failed Wait it holds none, and Leave does nothing.
func (t *Ticket) Leave() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if !t.held {
		return
	}
	q.release(t)
	q.endProbe(t)
	q.event(t.model)
	q.pump()
}

// Waited is how long the request waited in all.
func (t *Ticket) Waited() time.Duration { return t.waited }

// Notify tells the queue that model's capacity may have changed: a load report arrived,
// an engine joined or recovered.
func (q *Queue) Notify(model string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.event(model)
	q.pump()
}

// NotifyAll is Notify for every model, after a reload or a membership change.
func (q *Queue) NotifyAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for model := range q.lines {
		q.event(model)
	}
	q.pump()
}

// wait queues w for t's model, with q.mu held, and waits until it is let through, its
// time is up or ctx ends. It unlocks q.mu.
func (q *Queue) wait(ctx context.Context, t *Ticket, w *waiter) error {
	l := q.lines[t.model]
	if l == nil {
		l = &line{}
		q.lines[t.model] = l
	}
	now := q.cfg.Now()
	if t.since.IsZero() {
		if len(l.waiters) >= q.cfg.Size {
			err := q.refuse(t.model)
			q.mu.Unlock()
			return err
		}
		t.since = now
	}
	// A request back from selection keeps its arrival order: it goes before every later
	// arrival, which is the whole line when it was the head.
	i, _ := slices.BinarySearchFunc(l.waiters, w.seq, func(x *waiter, seq uint64) int { return cmp.Compare(x.seq, seq) })
	l.waiters = slices.Insert(l.waiters, i, w)
	w.ready = make(chan struct{})
	q.obs.Depth(t.model, len(l.waiters))
	q.pump()
	q.mu.Unlock()

	left := t.since.Add(q.cfg.Timeout).Sub(now)
	timer := time.NewTimer(left)
	defer timer.Stop()
	var cause error
	select {
	case <-w.ready:
	case <-timer.C:
	case <-ctx.Done():
		cause = context.Cause(ctx)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	waited := q.cfg.Now().Sub(t.since)
	if w.let {
		// Let through, possibly in the same instant as the timer or the client's leaving.
		t.held, t.epoch, t.waited, t.probe, t.queued = true, w.epoch, waited, w.paid, true
		if cause != nil {
			q.release(t)
			q.endProbe(t)
			q.pump()
			q.obs.Rejected(t.model, ClientGone)
			return &Error{Reason: ClientGone, Model: t.model, Waited: waited, Cause: cause}
		}
		return nil
	}
	q.remove(t.model, w)
	q.pump() // the next one may be free to go now
	if cause != nil {
		q.obs.Rejected(t.model, ClientGone)
		return &Error{Reason: ClientGone, Model: t.model, Waited: waited, Cause: cause}
	}
	q.obs.Rejected(t.model, Timeout)
	return &Error{Reason: Timeout, Model: t.model, Size: q.cfg.Size, Waited: waited, MaxWait: q.cfg.Timeout}
}

// refuse is the error of a request that finds no room to wait, with q.mu held.
func (q *Queue) refuse(model string) error {
	switch {
	case q.cfg.Size > 0:
		q.obs.Rejected(model, Full)
		return &Error{Reason: Full, Model: model, Size: q.cfg.Size, RetryAfter: time.Second}
	case !q.slotFree():
		q.obs.Rejected(model, OverCapacity)
		return &Error{Reason: OverCapacity, Model: model, Limit: q.cfg.MaxConcurrent, RetryAfter: time.Second}
	}
	q.obs.Rejected(model, RateLimited)
	return &Error{Reason: RateLimited, Model: model, Rate: q.cfg.Rate.PerSecond, RetryAfter: q.tokens.until(q.cfg.Now())}
}

// pump lets waiters through while slots and tokens last, the oldest head first among
// the models' lines; with q.mu held. A stuck head holds its line: nobody overtakes it.
func (q *Queue) pump() {
	for {
		var next *waiter
		var model string
		for m, l := range q.lines {
			if len(l.waiters) > 0 && !l.probing && !l.waiters[0].stuck && (next == nil || l.waiters[0].seq < next.seq) {
				next, model = l.waiters[0], m
			}
		}
		if next == nil || !q.slotFree() {
			return
		}
		if !next.paid && !q.takeToken() {
			q.wakeAtRefill()
			return
		}
		q.running++
		next.let, next.epoch = true, q.lines[model].epoch
		close(next.ready)
		q.lines[model].probing = next.paid
		q.remove(model, next)
	}
}

// endProbe records that t, if it was a probe, has said how selection went.
func (q *Queue) endProbe(t *Ticket) {
	if t.probe {
		t.probe = false
		q.lines[t.model].probing = false
	}
}

// remove takes w out of model's line, with q.mu held.
func (q *Queue) remove(model string, w *waiter) {
	l := q.lines[model]
	if i := slices.Index(l.waiters, w); i >= 0 {
		l.waiters = slices.Delete(l.waiters, i, i+1)
	}
	q.obs.Depth(model, len(l.waiters))
}

// event records a capacity event of model and lets its head try again.
func (q *Queue) event(model string) {
	if l := q.lines[model]; l != nil {
		l.epoch++
	}
	q.unstick(model)
}

func (q *Queue) unstick(model string) {
	if l := q.lines[model]; l != nil && len(l.waiters) > 0 {
		l.waiters[0].stuck = false
	}
}

// epochOf is model's capacity event count, creating its line so that events count from
// now on. Lines are never deleted: there is one per model of the plans served, whose
// names come from the configuration, never from a client.
func (q *Queue) epochOf(model string) uint64 {
	l := q.lines[model]
	if l == nil {
		l = &line{}
		q.lines[model] = l
	}
	return l.epoch
}

func (q *Queue) release(t *Ticket) {
	if t.held {
		t.held = false
		q.running--
	}
}

func (q *Queue) slotFree() bool { return q.running < q.cfg.MaxConcurrent }

func (q *Queue) takeToken() bool { return q.tokens == nil || q.tokens.take(q.cfg.Now()) }

// wakeAtRefill arms the timer that pumps the queue when the next token is due.
func (q *Queue) wakeAtRefill() {
	d := q.tokens.until(q.cfg.Now())
	if d == math.MaxInt64 {
		return // a rate of 0 never refills: waiters time out
	}
	if q.refill == nil {
		q.refill = time.AfterFunc(d, func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.pump()
		})
		return
	}
	q.refill.Reset(d)
}

// Reason is why the queue answered a request instead of letting it through; it is the
// label of router_queue_rejections_total.
type Reason string

const (
	// Full: the model's line holds queue.size waiters.
	Full Reason = "full"
	// Timeout: the request waited queue.timeout_ms.
	Timeout Reason = "timeout"
	// ClientGone: the client left while the request waited.
	ClientGone Reason = "client_gone"
	// OverCapacity: no queue, and every slot of limits.max_concurrent_requests is held.
	OverCapacity Reason = "over_capacity"
	// RateLimited: no queue, and the rate limit's bucket is empty.
	RateLimited Reason = "rate_limited"
)

// Error is a request the queue did not let through.
type Error struct {
	Reason Reason
	Model  string
	// Size is queue.size (Full, Timeout).
	Size int
	// Limit is limits.max_concurrent_requests (OverCapacity).
	Limit int
	// Rate is rate_limit.requests_per_second (RateLimited).
	Rate float64
	// Waited is how long the request waited; MaxWait is queue.timeout_ms.
	Waited, MaxWait time.Duration
	// RetryAfter is the Retry-After advice of a refusal at once.
	RetryAfter time.Duration
	// Cause is why the client's context ended (ClientGone).
	Cause error
}

func (e *Error) Error() string {
	switch e.Reason {
	case Full:
		if e.Model == "" {
			return fmt.Sprintf("the router holds its maximum of %d requests (limits.max_concurrent_requests served and queue.size waiting per model); retry later", e.Limit)
		}
		return fmt.Sprintf("model %s has %d requests waiting for capacity, the most queue.size allows; retry later or raise queue.size", e.Model, e.Size)
	case Timeout:
		return fmt.Sprintf("waited %v for capacity for model %s, the most queue.timeout_ms allows; retry later, add engines or raise queue.timeout_ms", e.MaxWait, e.Model)
	case ClientGone:
		return "client closed the request while it waited for capacity"
	case OverCapacity:
		return fmt.Sprintf("the router is serving its maximum of %d requests (limits.max_concurrent_requests); retry later, or set queue.size to let requests wait", e.Limit)
	}
	return fmt.Sprintf("over the rate limit of %g requests per second (rate_limit.requests_per_second); retry later, or set queue.size to let requests wait", e.Rate)
}

// Unwrap returns the client context's cause of a ClientGone error.
func (e *Error) Unwrap() error { return e.Cause }

type nopObserver struct{}

func (nopObserver) Depth(string, int)            {}
func (nopObserver) Waited(string, time.Duration) {}
func (nopObserver) Rejected(string, Reason)      {}
func (nopObserver) RateLimited(string)           {}

// Preview is what the queue would do with a request of a model arriving now, for
// `router explain`; it changes nothing.
type Preview struct {
	// Outcome is at_once, wait or refused.
	Outcome string `json:"outcome"`
	// Reason says why it would wait or be refused.
	Reason  string `json:"reason,omitempty"`
	Waiting int    `json:"waiting"`
	Size    int    `json:"size"`
	Running int    `json:"running"`
	// MaxConcurrent is limits.max_concurrent_requests.
	MaxConcurrent int `json:"max_concurrent_requests"`
}

// Preview is what Enter would do with a request of model now, and then Wait when
// admissionRejected (selection found only admission rejections).
func (q *Queue) Preview(model string, admissionRejected bool) Preview {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := Preview{Outcome: "at_once", Size: q.cfg.Size, Running: q.running, MaxConcurrent: q.cfg.MaxConcurrent}
	if l := q.lines[model]; l != nil {
		p.Waiting = len(l.waiters)
	}
	tokens := q.tokens == nil || q.tokens.until(q.cfg.Now()) == 0
	switch {
	case p.Waiting > 0:
		p.Reason = "others of its model wait already, and nobody overtakes them"
	case !q.slotFree():
		p.Reason = "every slot of limits.max_concurrent_requests is held"
	case !tokens:
		p.Reason = "the rate limit's bucket is empty"
	case admissionRejected:
		p.Reason = "every compatible bucket's engines are at their admission caps"
	default:
		return p
	}
	switch {
	case q.cfg.Size == 0:
		p.Outcome = "refused"
		p.Reason += ", and queue.size is 0"
	case p.Waiting >= q.cfg.Size:
		p.Outcome = "refused"
		p.Reason += ", and its line is full (queue.size)"
	default:
		p.Outcome = "wait"
	}
	return p
}

// String is the preview for a person: "would wait (3 waiting of 100): ...".
func (p Preview) String() string {
	switch p.Outcome {
	case "wait":
		return fmt.Sprintf("would wait (%d waiting of %d): %s", p.Waiting, p.Size, p.Reason)
	case "refused":
		return fmt.Sprintf("would be refused (%d waiting of %d): %s", p.Waiting, p.Size, p.Reason)
	}
	return fmt.Sprintf("would go at once (%d waiting of %d, %d of %d slots held)", p.Waiting, p.Size, p.Running, p.MaxConcurrent)
}
