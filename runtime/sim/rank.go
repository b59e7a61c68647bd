package sim

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// maxLag is how far a rank may fall behind its simulated schedule (a slow machine, a
// long garbage-collection pause) before it gives up catching up, so that it never runs a
// burst of steps without sleeping.
const maxLag = 50 * time.Millisecond

// rank is one data-parallel rank of an engine: a model, the goroutine that runs it and the
// publisher of its KV events.
type rank struct {
	id   int
	cfg  Config
	pub  *publisher // nil when KV events are off
	wake chan struct{}
	// slowdown returns the current slowdown fault, read once per step.
	slowdown func() float64
	// transferWaiting counts decode requests waiting for their prefill peer; they are
	// not in the model yet but count as waiting in load reports.
	transferWaiting atomic.Int64

	mu    sync.Mutex
	model *model
}

func newRank(id int, cfg Config, caching bool, pub *publisher, slowdown func() float64) *rank {
	return &rank{id: id, cfg: cfg, pub: pub, wake: make(chan struct{}, 1), slowdown: slowdown, model: newModel(cfg, caching)}
}

// submit queues a request and wakes the rank.
func (k *rank) submit(r *request) {
	k.mu.Lock()
	k.model.enqueue(r)
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// cancel aborts r if it has not finished.
func (k *rank) cancel(r *request) {
	k.mu.Lock()
	k.model.abort(r)
	k.mu.Unlock()
}

// progress returns how many tokens r has generated, how many input tokens were cached,
// and whether r is finished.
func (k *rank) progress(r *request) (generated, cached int, done bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return r.generated, r.cached, r.done
}

func (k *rank) load() load {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.model.load()
}

// flush empties the prefix cache if the rank is idle and reports whether it did.
func (k *rank) flush() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	ok := k.model.flush()
	k.publishLocked()
	return ok
}

// run drives the model until ctx ends: choose a step, sleep its scaled duration, apply it.
// Sleeps are measured against a running deadline, so timer granularity and scheduling
// delays do not accumulate over thousands of short decode steps.
func (k *rank) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	deadline := time.Now()
	for {
		k.mu.Lock()
		s := k.model.next()
		k.publishLocked() // evictions made while admitting
		k.mu.Unlock()
		if s.kind == idle {
			select {
			case <-k.wake:
				deadline = time.Now()
				continue
			case <-ctx.Done():
				return
			}
		}
		deadline = deadline.Add(k.scale(s.dur))
		if wait := time.Until(deadline); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		} else if wait < -maxLag {
			deadline = time.Now()
		}
		k.mu.Lock()
		k.model.finish(s)
		k.publishLocked()
		k.mu.Unlock()
	}
}

// scale turns simulated time into wall-clock time.
func (k *rank) scale(d time.Duration) time.Duration {
	f := k.cfg.TimeScale
	if s := k.slowdown(); s > 0 {
		f *= s
	}
	return time.Duration(float64(d) * f)
}

// publishLocked sends the model's pending KV events as one batch. The caller holds k.mu,
// which keeps batches in the order the cache changed.
func (k *rank) publishLocked() {
	events := k.model.takeEvents()
	if k.pub == nil || len(events) == 0 {
		return
	}
	if err := k.pub.publish(events); err != nil {
		slog.Warn("sim: dropped kv events", "dp_rank", k.id, "err", err)
	}
}
