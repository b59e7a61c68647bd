package server

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// Defect 11: when the grace period runs out, a stream still running ends with an SSE
// error event, and a non-streamed answer still running is a 503, not a truncated 200;
// for PD as for plain engines, where the cut reaches the decode half that streams.
func TestShutdownGraceExpiryEndsCleanly(t *testing.T) {
	for _, tc := range []struct {
		name, model, slow string
		plan              func() *plan.Plan
		engines           []string
	}{
		{"plain", "m", "E1", func() *plan.Plan { return plainPlan("E1") }, []string{"E1"}},
		{"pd", "pd", "D1", pdPlan, []string{"P1", "D1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forClientTransports(t, func(t *testing.T, kind plan.ClientTransport) {
				p := tc.plan()
				p.ClientTransport = kind
				p.ShutdownGraceSecs = 1
				fc := startFleet(t, p)
				_ = fc.fleet.Engine(tc.slow).SetFaults(sim.Faults{Slowdown: 2000}) // tokens far apart
				type result struct {
					status int
					body   string
				}
				stream, plain := make(chan result, 1), make(chan result, 1)
				started := make(chan struct{})
				go func() {
					resp, err := http.Post(fc.url+"/v1/chat/completions", "application/json", strings.NewReader(chat(tc.model, "a long story", `, "max_tokens": 500, "stream": true`)))
					if err != nil {
						stream <- result{-1, err.Error()}
						return
					}
					defer resp.Body.Close()
					br := bufio.NewReader(resp.Body)
					first, _ := br.ReadString('\n')
					close(started)
					rest, _ := io.ReadAll(br)
					stream <- result{resp.StatusCode, first + string(rest)}
				}()
				go func() {
					resp, err := http.Post(fc.url+"/v1/chat/completions", "application/json", strings.NewReader(chat(tc.model, "another long story", `, "max_tokens": 500`)))
					if err != nil {
						plain <- result{-1, err.Error()}
						return
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					plain <- result{resp.StatusCode, string(b)}
				}()
				<-started
				wait.For(t, "both in flight", func() bool { return fc.srv.reg.Get(tc.slow).Inflight() == 2 })
				fc.stop()
				if r := <-stream; r.status != 200 || !strings.Contains(r.body, `"code":"shutting_down"`) {
					t.Errorf("stream cut by shutdown: %d %.300s", r.status, r.body)
				}
				if r := <-plain; r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "shutting_down") {
					t.Errorf("answer cut by shutdown: %d %.300s", r.status, r.body)
				}
				if err := <-fc.served; err == nil {
					t.Error("serve reported a clean drain although requests were cut")
				}
				fc.served <- nil // for the cleanup
				for _, d := range fc.srv.recent.list() {
					if d.Status == 200 && !strings.Contains(d.Error, "shut") {
						t.Errorf("a request cut by shutdown is recorded as a clean 200: %+v", d)
					}
				}
				for _, id := range tc.engines {
					if fc.srv.reg.Get(id).Inflight() != 0 {
						t.Errorf("in-flight of %s not released after shutdown", id)
					}
				}
			})
		})
	}
}
