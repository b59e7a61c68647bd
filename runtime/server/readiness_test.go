package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

// twoModelPlan is models "a" (engine A1) and "b" (engine B1), plain, round robin.
func twoModelPlan(readiness string) *plan.Plan {
	a, b := plainEngine("A1"), plainEngine("B1")
	a.Model, b.Model = "a", "b"
	bucket := []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}}}
	p := testPlan([]plan.Engine{a, b}, plan.Model{Name: "a", Buckets: bucket}, plan.Model{Name: "b", Buckets: bucket})
	p.Readiness = readiness
	return p
}

// Readiness per model answers for one model; the replica's readiness follows the policy,
// and both see an engine removed through the admin API (which used to leave /readyz 200
// with a model that answered 503).
func TestReadinessPerModelAndPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy    string
		afterGone int // /readyz once model b has no engine
	}{
		{plan.ReadyAnyModel, http.StatusOK},
		{plan.ReadyEveryModel, http.StatusServiceUnavailable},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			fc := startFleet(t, twoModelPlan(tc.policy))
			check := func(path string, want int, wantBody string) {
				t.Helper()
				status, _, body := fc.call(t, http.MethodGet, path, "")
				if status != want || !strings.Contains(body, wantBody) {
					t.Fatalf("GET %s = %d %q; want %d with %q", path, status, body, want, wantBody)
				}
			}
			check("/readyz", http.StatusOK, "ready")
			check("/readyz?model=a", http.StatusOK, "ready")
			check("/readyz?model=b", http.StatusOK, "ready")
			check("/readyz?model=c", http.StatusNotFound, `model "c" is not served by this router; it serves a, b`)

			if status, _, body := fc.call(t, http.MethodDelete, "/admin/engines/B1", ""); status != http.StatusOK {
				t.Fatalf("removing B1: %d %s", status, body)
			}
			check("/readyz?model=b", http.StatusServiceUnavailable, "model b has no healthy plain engine")
			check("/readyz?model=a", http.StatusOK, "ready")
			check("/readyz", tc.afterGone, map[int]string{200: "ready", 503: "model b has no healthy plain engine"}[tc.afterGone])
			if status, _, _ := fc.post(t, chat("b", "hi", `, "max_tokens": 1`)); status != http.StatusServiceUnavailable {
				t.Fatalf("model b without engines answered %d, want 503", status)
			}

			if status, _, body := fc.call(t, http.MethodDelete, "/admin/engines/A1", ""); status != http.StatusOK {
				t.Fatalf("removing A1: %d %s", status, body)
			}
			check("/readyz", http.StatusServiceUnavailable, "model a has no healthy plain engine")
		})
	}
}

// balancer is a load balancer as Kubernetes Services are: it polls each router's /readyz
// and sends only to routers that answered 200 last.
type balancer struct {
	urls  []string
	ready []atomic.Bool
	next  atomic.Uint64
}

func newBalancer(urls ...string) *balancer {
	b := &balancer{urls: urls, ready: make([]atomic.Bool, len(urls))}
	for i := range b.ready {
		b.ready[i].Store(true)
	}
	return b
}

// poll checks every router's readiness every interval until done is closed.
func (b *balancer) poll(interval time.Duration, done <-chan struct{}) {
	client := &http.Client{Timeout: time.Second}
	for {
		for i, u := range b.urls {
			resp, err := client.Get(u + "/readyz")
			b.ready[i].Store(err == nil && resp.StatusCode == http.StatusOK)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		select {
		case <-done:
			return
		case <-time.After(interval):
		}
	}
}

// pick returns the next ready router round robin, -1 when none is.
func (b *balancer) pick() int {
	for range b.urls {
		i := int(b.next.Add(1) % uint64(len(b.urls)))
		if b.ready[i].Load() {
			return i
		}
	}
	return -1
}

// A rolling restart behind a readiness-polling balancer loses no request: the stopped
// router reports unready and keeps serving for shutdown_delay_secs, by which time the
// balancer sends elsewhere, and only then closes its listener. With no delay the
// listener closes while the balancer still sends to it.
func TestShutdownDelayLosesNoRequestBehindBalancer(t *testing.T) {
	p := plainPlan("E1", "E2")
	p.ShutdownDelaySecs = 1
	first := startFleet(t, p)
	second := serveRouter(t, clonePlan(t, p), Options{})
	lb := newBalancer(first.url, second.url)

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { lb.poll(50*time.Millisecond, done) })
	var sent, failed, afterStop [2]atomic.Int64
	var stopped atomic.Bool
	var firstErr atomic.Value
	for range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				i := lb.pick()
				if i < 0 {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				sent[i].Add(1)
				if stopped.Load() {
					afterStop[i].Add(1)
				}
				resp, err := http.Post(lb.urls[i]+"/v1/chat/completions", "application/json",
					strings.NewReader(chat("m", fmt.Sprintf("request %d", n), `, "max_tokens": 1`)))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failed[i].Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wait.For(t, "traffic on both routers", func() bool { return sent[0].Load() > 20 && sent[1].Load() > 20 })
	stopped.Store(true)
	first.stop() // SIGTERM
	wait.For(t, "the balancer to drop the stopped router", func() bool { return !lb.ready[0].Load() })
	// Past the delay the stopped router's listener is closed; traffic goes on meanwhile.
	wait.For(t, "the stopped router's listener to close", func() bool {
		_, err := http.Get(first.url + "/healthz")
		return err != nil
	})
	n := sent[1].Load()
	wait.For(t, "more traffic on the other router", func() bool { return sent[1].Load() > n+20 })
	close(done)
	wg.Wait()
	if f := failed[0].Load() + failed[1].Load(); f != 0 {
		t.Fatalf("%d of %d requests failed through the restart; first: %v", f, sent[0].Load()+sent[1].Load(), firstErr.Load())
	}
	t.Logf("sent %d and %d requests, %d and %d after the stop", sent[0].Load(), sent[1].Load(), afterStop[0].Load(), afterStop[1].Load())
}
