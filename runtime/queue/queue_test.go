package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// record is an Observer that keeps what it is told.
type record struct {
	mu       sync.Mutex
	depth    map[string]int
	waits    []time.Duration
	rejected []Reason
}

func (r *record) Depth(model string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.depth == nil {
		r.depth = map[string]int{}
	}
	r.depth[model] = n
}

func (r *record) Waited(_ string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, d)
}

func (r *record) RateLimited(string) {}

func (r *record) Rejected(_ string, why Reason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = append(r.rejected, why)
}

// arrive starts a request for model in its own goroutine, once every earlier one is
// blocked, so arrival order is the order of the calls; done receives its ticket or error.
type result struct {
	name string
	t    *Ticket
	err  error
}

func arrive(ctx context.Context, q *Queue, model, name string, done chan<- result) {
	go func() {
		t, err := q.Enter(ctx, model)
		done <- result{name, t, err}
	}()
	synctest.Wait()
}

func reasonOf(err error) Reason {
	var qe *Error
	if errors.As(err, &qe) {
		return qe.Reason
	}
	return ""
}

// Waiters are let through in arrival order as slots free, one slot at a time; one more
// than queue.size is refused at once with Full and a Retry-After.
func TestFIFOAndBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &record{}
		q := New(Config{Size: 3, Timeout: time.Minute, MaxConcurrent: 1}, obs)
		first, err := q.Enter(t.Context(), "m")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan result, 8)
		for _, name := range []string{"b", "c", "d"} {
			arrive(t.Context(), q, "m", name, done)
		}
		if n := q.Waiting("m"); n != 3 {
			t.Fatalf("waiting = %d, want 3", n)
		}
		_, err = q.Enter(t.Context(), "m")
		var qe *Error
		if !errors.As(err, &qe) || qe.Reason != Full || qe.RetryAfter <= 0 {
			t.Fatalf("fourth waiter: %v, want Full with a Retry-After", err)
		}
		var order []string
		holder := first
		for range 3 {
			time.Sleep(time.Second)
			holder.Leave()
			synctest.Wait()
			select {
			case r := <-done:
				if r.err != nil {
					t.Fatalf("%s: %v", r.name, r.err)
				}
				order = append(order, r.name)
				holder = r.t
				holder.Served()
			default:
				t.Fatal("a slot freed and nobody was let through")
			}
			if len(done) != 0 {
				t.Fatal("one slot let two waiters through")
			}
		}
		holder.Leave()
		if want := []string{"b", "c", "d"}; !slices.Equal(order, want) {
			t.Errorf("let through in order %v, want %v", order, want)
		}
		if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(obs.waits, want) {
			t.Errorf("waits %v, want %v", obs.waits, want)
		}
		if !slices.Equal(obs.rejected, []Reason{Full}) || obs.depth["m"] != 0 || q.Running() != 0 {
			t.Errorf("rejected %v, depth %d, running %d", obs.rejected, obs.depth["m"], q.Running())
		}
	})
}

// A waiter is answered Timeout after queue.timeout_ms, and its place is given up.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &record{}
		q := New(Config{Size: 1, Timeout: 250 * time.Millisecond, MaxConcurrent: 1}, obs)
		held, _ := q.Enter(t.Context(), "m")
		start := time.Now()
		_, err := q.Enter(t.Context(), "m")
		var qe *Error
		if !errors.As(err, &qe) || qe.Reason != Timeout || qe.Waited != 250*time.Millisecond || time.Since(start) != 250*time.Millisecond {
			t.Fatalf("got %v after %v, want Timeout after 250ms", err, time.Since(start))
		}
		if q.Waiting("m") != 0 || !slices.Equal(obs.rejected, []Reason{Timeout}) {
			t.Errorf("waiting %d, rejected %v", q.Waiting("m"), obs.rejected)
		}
		held.Leave()
		if q.Running() != 0 {
			t.Errorf("running = %d after every request left", q.Running())
		}
	})
}

// A client that leaves is removed from its line at once and never let through: the
// slot that frees later goes to the one behind it.
func TestClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &record{}
		q := New(Config{Size: 5, Timeout: time.Minute, MaxConcurrent: 1}, obs)
		held, _ := q.Enter(t.Context(), "m")
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan result, 2)
		arrive(ctx, q, "m", "gone", done)
		arrive(t.Context(), q, "m", "stays", done)
		cancel(errors.New("client left"))
		synctest.Wait()
		r := <-done
		if r.name != "gone" || reasonOf(r.err) != ClientGone || !errors.Is(r.err, context.Cause(ctx)) {
			t.Fatalf("%s: %v, want the leaving client's ClientGone", r.name, r.err)
		}
		if q.Waiting("m") != 1 {
			t.Fatalf("waiting = %d after the client left, want 1", q.Waiting("m"))
		}
		held.Leave()
		synctest.Wait()
		r = <-done
		if r.name != "stays" || r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		r.t.Leave()
		if !slices.Equal(obs.rejected, []Reason{ClientGone}) || q.Running() != 0 {
			t.Errorf("rejected %v, running %d", obs.rejected, q.Running())
		}
	})
}

// Without a queue, a request finding every slot held is answered OverCapacity at once.
func TestNoQueueOverCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Timeout: time.Minute, MaxConcurrent: 2}, nil)
		a, _ := q.Enter(t.Context(), "m")
		b, _ := q.Enter(t.Context(), "n")
		if _, err := q.Enter(t.Context(), "m"); reasonOf(err) != OverCapacity {
			t.Fatalf("third request: %v, want OverCapacity", err)
		}
		a.Leave()
		c, err := q.Enter(t.Context(), "m")
		if err != nil {
			t.Fatalf("after a slot freed: %v", err)
		}
		b.Leave()
		c.Leave()
	})
}

// The rate limit lets burst requests through at once, then one per 1/rate; without a
// queue the next is answered RateLimited with the time to the next token as Retry-After.
func TestRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Size: 10, Timeout: time.Minute, MaxConcurrent: 100, Rate: &Rate{PerSecond: 4, Burst: 2}}, nil)
		start := time.Now()
		var at []time.Duration
		for range 5 {
			tk, err := q.Enter(t.Context(), "m")
			if err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Since(start))
			defer tk.Leave()
		}
		if want := []time.Duration{0, 0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond}; !slices.Equal(at, want) {
			t.Errorf("let through at %v, want %v", at, want)
		}

		none := New(Config{Timeout: time.Minute, MaxConcurrent: 100, Rate: &Rate{PerSecond: 4, Burst: 1}}, nil)
		tk, _ := none.Enter(t.Context(), "m")
		defer tk.Leave()
		time.Sleep(100 * time.Millisecond)
		_, err := none.Enter(t.Context(), "m")
		var qe *Error
		if !errors.As(err, &qe) || qe.Reason != RateLimited || qe.RetryAfter != 150*time.Millisecond {
			t.Fatalf("without a queue: %v (retry after %v), want RateLimited after 150ms", err, qe.RetryAfter)
		}
	})
}

// A request back from selection with only admission rejections waits for its model's
// next capacity event, and keeps its place: a later arrival of its model does not
// overtake it though a slot is free; when the head is served, the next one goes.
func TestAdmissionWaitKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Size: 5, Timeout: time.Minute, MaxConcurrent: 10}, nil)
		head, _ := q.Enter(t.Context(), "m")
		back := make(chan error, 1)
		go func() { back <- head.Wait(t.Context()) }()
		synctest.Wait()
		done := make(chan result, 2)
		arrive(t.Context(), q, "m", "later", done)
		arrive(t.Context(), q, "other", "other model", done)
		if r := <-done; r.name != "other model" || r.err != nil {
			t.Fatalf("another model's request must not wait behind m's: %s %v", r.name, r.err)
		} else {
			r.t.Leave()
		}
		if len(back) != 0 || len(done) != 0 || q.Waiting("m") != 2 {
			t.Fatalf("before any capacity event: head back %d, later %d, waiting %d", len(back), len(done), q.Waiting("m"))
		}
		q.Notify("m")
		synctest.Wait()
		if err := <-back; err != nil {
			t.Fatal(err)
		}
		if len(done) != 0 {
			t.Fatal("the later arrival went with the head, before the head was served")
		}
		head.Served()
		synctest.Wait()
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		head.Leave()
		r.t.Leave()
		if q.Running() != 0 {
			t.Errorf("running = %d", q.Running())
		}
	})
}

// A capacity event while the request was selecting counts: it does not wait for the
// next one.
func TestEventDuringSelection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Size: 5, Timeout: time.Minute, MaxConcurrent: 10}, nil)
		tk, _ := q.Enter(t.Context(), "m")
		other, _ := q.Enter(t.Context(), "m")
		other.Leave() // a request of m finished while tk was selecting
		if err := tk.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		tk.Leave()
	})
}

// Many clients at once, some leaving: every request gets exactly one outcome and the
// slots all come back.
func TestNoRequestLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Size: 20, Timeout: 5 * time.Second, MaxConcurrent: 3}, nil)
		var mu sync.Mutex
		outcomes := map[string]int{}
		var wg sync.WaitGroup
		for i := range 60 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i%7)*time.Second)
				defer cancel()
				tk, err := q.Enter(ctx, fmt.Sprint("m", i%2))
				outcome := string(reasonOf(err))
				if err == nil {
					outcome = "served"
					time.Sleep(200 * time.Millisecond)
					tk.Leave()
				}
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
			})
		}
		wg.Wait()
		total := 0
		for _, n := range outcomes {
			total += n
		}
		if total != 60 || outcomes["served"] == 0 || outcomes[string(Full)] == 0 || q.Running() != 0 || q.Waiting("m0")+q.Waiting("m1") != 0 {
			t.Errorf("outcomes %v (total %d), running %d", outcomes, total, q.Running())
		}
	})
}

// Preview says what Enter would do, and changes nothing.
func TestPreview(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Config{Size: 2, Timeout: time.Minute, MaxConcurrent: 1}, nil)
		if p := q.Preview("m", false); p.Outcome != "at_once" {
			t.Errorf("empty queue: %v", p)
		}
		if p := q.Preview("m", true); p.Outcome != "wait" || p.String() != "would wait (0 waiting of 2): every compatible bucket's engines are at their admission caps" {
			t.Errorf("after admission rejections: %q", p)
		}
		held, _ := q.Enter(t.Context(), "m")
		done := make(chan result, 2)
		arrive(t.Context(), q, "m", "a", done)
		if p := q.Preview("m", false); p.Outcome != "wait" || p.Waiting != 1 || p.Running != 1 {
			t.Errorf("one waiting: %v", p)
		}
		arrive(t.Context(), q, "m", "b", done)
		if p := q.Preview("m", false); p.Outcome != "refused" || p.Waiting != 2 {
			t.Errorf("a full line: %v", p)
		}
		if q.Waiting("m") != 2 || q.Running() != 1 {
			t.Error("Preview changed the queue")
		}
		held.Leave()
		for range 2 {
			r := <-done
			r.t.Leave()
		}
	})
}
