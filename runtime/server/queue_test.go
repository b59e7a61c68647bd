package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/plan"
)

// gate holds the chat requests the router dispatches to each engine until the test opens
// that engine's gate, so a test decides when capacity frees; the requests then go on to
// the simulated engines over real sockets.
type gate struct {
	next http.RoundTripper
	mu   sync.Mutex
	held map[string]int           // requests held or passed, by engine URL
	open map[string]chan struct{} // closed when the engine's gate opens
}

func newGate(p *plan.Plan) *gate {
	g := &gate{next: dispatch.NewTransport(dispatch.TimeoutsOf(p.Timeouts), p.EngineTransport, nil),
		held: map[string]int{}, open: map[string]chan struct{}{}}
	return g
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost {
		base := req.URL.Scheme + "://" + req.URL.Host
		g.mu.Lock()
		g.held[base]++
		ch := g.openCh(base)
		g.mu.Unlock()
		select {
		case <-ch:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return g.next.RoundTrip(req)
}

func (g *gate) openCh(base string) chan struct{} {
	if g.open[base] == nil {
		g.open[base] = make(chan struct{})
	}
	return g.open[base]
}

// release opens the gate of the engine at base.
func (g *gate) release(base string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.openCh(base))
}

func (g *gate) count(base string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[base]
}

// startGated serves a router of p over simulated engines through a gate.
func startGated(t *testing.T, p *plan.Plan) (*fleetCase, *gate) {
	t.Helper()
	fleet := startSims(t, p, 0)
	for i := range p.Engines {
		p.Engines[i].URL = fleet.Engine(p.Engines[i].ID).URL()
	}
	g := newGate(p)
	fc := serveWith(t, p, Options{Transport: g}, nil)
	fc.fleet = fleet
	return fc, g
}

// answerOf is one client's outcome.
type answerOf struct {
	status     int
	code       string
	retryAfter string
	err        error
}

// send posts a chat request in the background; its answer arrives on out.
func (fc *fleetCase) send(ctx context.Context, content string, out chan<- answerOf) {
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fc.url+"/v1/chat/completions", strings.NewReader(chat("m", content, `, "max_tokens": 4`)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- answerOf{err: err}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out <- answerOf{status: resp.StatusCode, code: resp.Header.Get("X-Router-Error-Code"), retryAfter: resp.Header.Get("Retry-After")}
	}()
}

// Issue #26's overload case: limits.max_concurrent_requests 2 and queue.size 6. Two
// requests are served, six wait, and the three beyond the queue are answered 429
// queue_full with Retry-After at once; when capacity frees, the six complete with 200.
// Every request gets exactly one answer.
func TestQueueOverloadBurst(t *testing.T) {
	p := plainPlan("E1")
	p.Limits.MaxConcurrentRequests = 2
	p.Queue = plan.Queue{Size: 6, TimeoutMS: 60000}
	fc, g := startGated(t, p)
	e1 := p.Engines[0].URL
	out := make(chan answerOf, 16)
	for i := range 2 {
		fc.send(t.Context(), "served "+string(rune('a'+i)), out)
	}
	wait.For(t, "two requests at the engine", func() bool { return g.count(e1) == 2 })
	for i := range 6 {
		fc.send(t.Context(), "queued "+string(rune('a'+i)), out)
	}
	wait.For(t, "six requests waiting", func() bool { return fc.srv.active.queue.Waiting("m") == 6 })
	for i := range 3 {
		fc.send(t.Context(), "refused "+string(rune('a'+i)), out)
		a := <-out
		if a.status != http.StatusTooManyRequests || a.code != answer.CodeQueueFull || a.retryAfter != "1" {
			t.Fatalf("beyond the queue: %+v, want 429 queue_full with Retry-After 1", a)
		}
	}
	if n := g.count(e1); n != 2 {
		t.Fatalf("%d requests reached the engine before capacity freed, want 2", n)
	}
	g.release(e1)
	for range 8 {
		if a := <-out; a.err != nil || a.status != http.StatusOK {
			t.Errorf("a served or queued request got %+v, want 200", a)
		}
	}
	if n := g.count(e1); n != 8 {
		t.Errorf("the engine got %d requests, want the 8 served and queued", n)
	}
	// A request is counted after its answer went out.
	for _, series := range []string{
		`router_queue_rejections_total{model="m",reason="full"} 3`,
		`router_queue_depth{model="m"} 0`,
		`router_queue_wait_seconds_count{model="m"} 6`,
		`router_requests_total{bucket="all",model="m",status="200"} 8`,
	} {
		wait.For(t, series, func() bool { return strings.Contains(fc.metricsText(t), series) })
	}
}

// A request that selection rejects on admission caps waits, and when capacity frees it
// runs selection again from the start: it goes to the engine that freed, not to the one
// it was rejected by.
func TestQueuedRequestReselects(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Limits: plan.Limits{Max: i64(1000)}, MaxContextTokens: i64(2000),
			Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{MaxInflightRequests: 1}))}},
	}})
	p.Queue = plan.Queue{Size: 4, TimeoutMS: 60000}
	fc, g := startGated(t, p)
	e1, e2 := p.Engines[0].URL, p.Engines[1].URL
	out := make(chan answerOf, 8)
	fc.send(t.Context(), "first", out)
	fc.send(t.Context(), "second", out)
	wait.For(t, "one request at each engine", func() bool { return g.count(e1) == 1 && g.count(e2) == 1 })
	late := make(chan answerOf, 1)
	fc.send(t.Context(), "third", late)
	wait.For(t, "the third waiting", func() bool { return fc.srv.active.queue.Waiting("m") == 1 })

	g.release(e2)
	if a := <-late; a.status != http.StatusOK {
		t.Fatalf("the waiting request got %+v after E2 freed, want 200", a)
	}
	if g.count(e2) != 2 || g.count(e1) != 1 {
		t.Errorf("engines got E1 %d, E2 %d requests; the waiter must go to E2, which freed", g.count(e1), g.count(e2))
	}
	if a := <-out; a.status != http.StatusOK {
		t.Errorf("E2's first request: %+v", a)
	}
	g.release(e1)
	if a := <-out; a.status != http.StatusOK {
		t.Errorf("E1's request: %+v", a)
	}
}

// A waiter past queue.timeout_ms is answered 408 queue_timeout, and a client that leaves
// while it waits is removed at once; neither is ever dispatched.
func TestQueueTimeoutAndClientGone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timeoutMS int
		leave     bool
		reason    string
	}{
		{name: "timeout", timeoutMS: 300, reason: "timeout"},
		{name: "client gone", timeoutMS: 60000, leave: true, reason: "client_gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plainPlan("E1")
			p.Limits.MaxConcurrentRequests = 1
			p.Queue = plan.Queue{Size: 4, TimeoutMS: tc.timeoutMS}
			fc, g := startGated(t, p)
			e1 := p.Engines[0].URL
			held := make(chan answerOf, 1)
			fc.send(t.Context(), "held", held)
			wait.For(t, "a request at the engine", func() bool { return g.count(e1) == 1 })

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			waiting := make(chan answerOf, 1)
			fc.send(ctx, "waits", waiting)
			if tc.leave {
				wait.For(t, "the client waiting", func() bool { return fc.srv.active.queue.Waiting("m") == 1 })
				cancel()
				if a := <-waiting; !errors.Is(a.err, context.Canceled) {
					t.Fatalf("leaving client: %+v", a)
				}
			} else if a := <-waiting; a.status != http.StatusRequestTimeout || a.code != answer.CodeQueueTimeout {
				t.Fatalf("a waiter past queue.timeout_ms got %+v, want 408 queue_timeout", a)
			}
			wait.For(t, "the queue empty", func() bool { return fc.srv.active.queue.Waiting("m") == 0 })
			g.release(e1)
			if a := <-held; a.status != http.StatusOK {
				t.Errorf("held request: %+v", a)
			}
			fc.inflightZero(t)
			if n := g.count(e1); n != 1 {
				t.Errorf("the engine got %d requests; the waiter must never be dispatched", n)
			}
			series := `router_queue_rejections_total{model="m",reason="` + tc.reason + `"} 1`
			wait.For(t, series, func() bool { return strings.Contains(fc.metricsText(t), series) })
		})
	}
}

// Without a queue the rate limit answers 429 rate_limited at once, with the time to the
// next token as Retry-After.
func TestRateLimitWithoutQueue(t *testing.T) {
	p := plainPlan("E1")
	p.RateLimit = &plan.RateLimit{RequestsPerSecond: 0.01, Burst: 2}
	fc := startFleet(t, p)
	for i := range 2 {
		if status, code, body := fc.post(t, chat("m", "within the burst", "")); status != http.StatusOK {
			t.Fatalf("request %d within the burst: %d %s %s", i, status, code, body)
		}
	}
	resp, err := http.Post(fc.url+"/v1/chat/completions", "application/json", strings.NewReader(chat("m", "over", "")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("X-Router-Error-Code") != answer.CodeRateLimited || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the rate: %d %s Retry-After %q, want 429 rate_limited with Retry-After", resp.StatusCode, resp.Header.Get("X-Router-Error-Code"), resp.Header.Get("Retry-After"))
	}
	if m := fc.metricsText(t); !strings.Contains(m, `router_rate_limited_total{model="m"} 1`) {
		t.Error("/metrics does not count the rate-limited request")
	}
}

// The queue and the rate limit are sized once: a reload that changes them is refused.
func TestQueueSettingsNeedARestart(t *testing.T) {
	p := plainPlan("E1")
	var next *plan.Plan
	fc := startFleetWith(t, p, 0, Options{Reload: func() (*plan.Plan, error) { return next, nil }})
	for _, change := range []struct {
		name string
		set  func(*plan.Plan)
	}{
		{"queue", func(n *plan.Plan) { n.Queue.Size = 5 }},
		{"rate_limit", func(n *plan.Plan) { n.RateLimit = &plan.RateLimit{RequestsPerSecond: 1, Burst: 1} }},
	} {
		next = clone(p)
		change.set(next)
		status, body := fc.postJSON(t, "/admin/reload", "")
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), change.name+" changed, which only a restart applies") {
			t.Errorf("reload changing %s: %d %s", change.name, status, body)
		}
	}
}
