package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// testClock is a settable clock for breakers.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Defect 5: an engine answering 5xx or 429 fast (or hanging) trips its breaker and
// leaves the candidate sets although its health checks pass; after the open period a
// probe brings it back. The state shows in /admin/state and /metrics.
func TestBreakerTakesFailingEngineOut(t *testing.T) {
	for _, fault := range []sim.Faults{{FailStatus: 500}, {FailStatus: 429}, {Hang: true}} {
		t.Run(fmt.Sprint(fault.FailStatus, fault.Hang), func(t *testing.T) {
			p := plainPlan("E1", "E2")
			p.Timeouts = fastTimeouts
			p.Breaker = plan.Breaker{FailureThreshold: 2, OpenMS: 60_000}
			clk := &testClock{now: time.Unix(1000, 0)}
			fc := startFleetWith(t, p, 0.01, Options{Clock: clk.Now})
			_ = fc.fleet.Engine("E1").SetFaults(fault)
			for range 8 {
				fc.post(t, chat("m", "x", `, "max_tokens": 1`))
			}
			if n := len(fc.sent.bodies(p.Engines[0].URL)); n != 2 {
				t.Errorf("E1 got %d requests, want 2 (then its breaker opens)", n)
			}
			st := fc.state(t).engine("E1")
			if st.Breaker != "open" || !st.Healthy {
				t.Errorf("E1 state: breaker %q healthy %v, want open and healthy", st.Breaker, st.Healthy)
			}
			if !strings.Contains(fc.metricsText(t), `router_engine_breaker_state{engine="E1"} 1`) {
				t.Error("the open breaker is not in /metrics")
			}
			resp, err := http.Post(fc.url+"/admin/explain", "application/json", strings.NewReader(chat("m", "x", "")))
			if err != nil {
				t.Fatal(err)
			}
			var ex explain.Explanation
			_ = json.NewDecoder(resp.Body).Decode(&ex)
			resp.Body.Close()
			if len(ex.Breakers) != 1 || ex.Breakers[0] != (explain.Breaker{Engine: "E1", State: "open"}) || ex.Picks[plan.RolePlain] != "E2" {
				t.Errorf("explain: breakers %+v, picks %v", ex.Breakers, ex.Picks)
			}
			_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{})
			clk.add(time.Minute)
			for range 4 {
				if status, _, body := fc.post(t, chat("m", "x", `, "max_tokens": 1`)); status != 200 {
					t.Fatalf("after recovery: %d %s", status, body)
				}
			}
			if n := len(fc.sent.bodies(p.Engines[0].URL)); n < 3 {
				t.Errorf("E1 got no probe after the open period (%d requests)", n)
			}
			if st := fc.state(t).engine("E1"); st.Breaker != "closed" {
				t.Errorf("after a good probe the breaker is %q", st.Breaker)
			}
			fc.inflightZero(t)
		})
	}
}

// Retries: an engine that refuses connections never got the request, so another engine
// gets it; with max_attempts 1 the refusal is the answer.
func TestRetryOnlyWhatWasNeverSent(t *testing.T) {
	for _, attempts := range []int{1, 2} {
		t.Run(fmt.Sprint(attempts), func(t *testing.T) {
			p := plainPlan("E1", "E2")
			p.Health.IntervalMS = 3_600_000 // the router keeps believing E1 is up
			p.Retries.MaxAttempts = attempts
			fc := startFleet(t, p)
			if err := fc.fleet.Engine("E1").Kill(); err != nil {
				t.Fatal(err)
			}
			// A connection pooled before the kill may take the request before it sees the
			// close: then the request may have been received and is rightly not retried.
			// Refused connections are what this test is about.
			fc.sent.next.(interface{ CloseIdleConnections() }).CloseIdleConnections()
			var statuses []int
			for range 2 { // round robin: one of the two starts at E1
				status, _, _ := fc.post(t, chat("m", "x", `, "max_tokens": 1`))
				statuses = append(statuses, status)
			}
			want := map[int][]int{1: {502, 200}, 2: {200, 200}}[attempts]
			if fmt.Sprint(statuses) != fmt.Sprint(want) {
				t.Errorf("statuses %v, want %v", statuses, want)
			}
			if attempts == 2 && !regexp.MustCompile(`router_retries_total\{model="m"\} [12]\n`).MatchString(fc.metricsText(t)) {
				t.Error("the retry is not counted")
			}
			// A failure after the engine got the request is never retried.
			_ = fc.fleet.Engine("E2").SetFaults(sim.Faults{FailStatus: 500})
			if status, _, _ := fc.post(t, chat("m", "x", `, "max_tokens": 1`)); status != 502 {
				t.Errorf("5xx: %d, want 502 without a retry", status)
			}
			fc.inflightZero(t)
		})
	}
}

// Defect 6: a client trickling its body is cut after body_read_ms with 408; requests
// over limits.max_concurrent_requests are answered 503 at once.
func TestBodyReadTimeoutAndConcurrencyCap(t *testing.T) {
	p := plainPlan("E1")
	p.Timeouts = fastTimeouts
	p.Limits.MaxConcurrentRequests = 1
	fc := startFleet(t, p)
	conn, err := net.Dial("tcp", strings.TrimPrefix(fc.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mo")
	_ = conn.SetReadDeadline(time.Now().Add(wait.Timeout))
	buf := make([]byte, 4096)
	n, _ := conn.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 408") || !strings.Contains(string(buf[:n]), answer.CodeBodyTimeout) {
		t.Errorf("trickling client got %q", buf[:n])
	}

	_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{Hang: true})
	held := make(chan struct{})
	go func() {
		defer close(held)
		fc.post(t, chat("m", "hold", ""))
	}()
	wait.For(t, "a request in flight", func() bool { return fc.srv.reg.Get("E1").Inflight() == 1 })
	if status, code, _ := fc.post(t, chat("m", "one too many", "")); status != 503 || code != answer.CodeOverCapacity {
		t.Errorf("over the cap: %d %s", status, code)
	}
	<-held // the held request times out (first byte)
	fc.inflightZero(t)
	m := fc.metricsText(t)
	for _, series := range []string{`router_timeouts_total{phase="first_byte",stage="plain"} 1`, `router_timeouts_total{phase="body_read",stage="client"} 1`} {
		if !strings.Contains(m, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// A decode engine is not blamed for its prefill's failures: only the prefill's breaker
// opens.
func TestPDBreakerBlamesTheFailingHalf(t *testing.T) {
	p := pdPlan()
	p.Breaker = plan.Breaker{FailureThreshold: 2, OpenMS: 60_000}
	fc := startFleet(t, p)
	_ = fc.fleet.Engine("P1").SetFaults(sim.Faults{FailStatus: 500})
	for range 3 {
		fc.post(t, chat("pd", "x", `, "max_tokens": 2`))
	}
	if p1, d1 := fc.state(t).engine("P1").Breaker, fc.state(t).engine("D1").Breaker; p1 != "open" || d1 != "closed" {
		t.Errorf("breakers: P1 %s, D1 %s; want P1 open, D1 closed", p1, d1)
	}
	fc.inflightZero(t)
}
