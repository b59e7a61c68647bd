package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/sim"
)

// Defect 2: a hung prefill engine is a 504 within timeouts.prefill_status_ms, even while
// the decode half waits for the KV hand-over.
func TestPDHungPrefillIsBounded(t *testing.T) {
	p := pdPlan()
	p.Timeouts = fastTimeouts
	fc := startFleet(t, p)
	_ = fc.fleet.Engine("P1").SetFaults(sim.Faults{Hang: true})
	for _, stream := range []string{"false", "true"} {
		start := time.Now()
		status, code, body := fc.post(t, chat("pd", "hang", `, "max_tokens": 4, "stream": `+stream))
		if status != http.StatusGatewayTimeout || code != answer.CodePrefillError || !strings.Contains(body, "prefill_status") {
			t.Errorf("stream %s: %d %s %s", stream, status, code, body)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("stream %s: answered after %v", stream, took)
		}
	}
	fc.inflightZero(t)
	if !strings.Contains(fc.metricsText(t), `router_timeouts_total{phase="prefill_status",stage="prefill"} 2`) {
		t.Error("the prefill-status timeouts are not counted")
	}
}

// Defect 3: when both halves fail at once, and when the client half-closes after
// sending, the answer is a status the client can act on, never an empty 200.
func TestPDBothHalvesFailingAlwaysAnswers(t *testing.T) {
	fc := startFleet(t, pdPlan())
	for _, id := range []string{"P1", "D1"} {
		_ = fc.fleet.Engine(id).SetFaults(sim.Faults{FailStatus: 503})
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for range 64 {
		wg.Go(func() {
			resp, err := client.Post(fc.url+"/v1/chat/completions", "application/json", strings.NewReader(chat("pd", "both fail", `, "max_tokens": 2`)))
			if err != nil {
				errs <- err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if (resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusServiceUnavailable) || len(body) == 0 {
				errs <- fmt.Sprintf("%d %q", resp.StatusCode, body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("both halves failing: %s", e)
	}
	fc.inflightZero(t)
}

func TestHalfClosedClientGetsAStatus(t *testing.T) {
	for _, model := range []string{"pd", "m"} {
		t.Run(model, func(t *testing.T) {
			p := pdPlan()
			if model == "m" {
				p = plainPlan("E1")
			}
			fc := startFleet(t, p)
			conn, err := net.Dial("tcp", strings.TrimPrefix(fc.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			body := chat(model, "half close", `, "max_tokens": 2`)
			fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			_ = conn.(*net.TCPConn).CloseWrite()
			_ = conn.SetReadDeadline(time.Now().Add(wait.Timeout))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The server notices the half-close and cancels: whatever the status, it is one
			// with a body saying what happened, or the real answer.
			if resp.StatusCode == 200 && !strings.Contains(string(got), "choices") || resp.StatusCode != 200 && resp.Header.Get("X-Router-Error-Code") == "" {
				t.Errorf("half-closed client got %d %q", resp.StatusCode, got)
			}
			fc.inflightZero(t)
		})
	}
}

// Defect 4: a 4xx from either PD half reaches the client as that 4xx, as from a plain
// engine, so SDKs do not retry requests that can never succeed.
func TestPD4xxFromEitherHalfIs4xx(t *testing.T) {
	for _, half := range []string{"P1", "D1"} {
		t.Run(half, func(t *testing.T) {
			fc := startFleet(t, pdPlan())
			_ = fc.fleet.Engine(half).SetFaults(sim.Faults{FailStatus: 400})
			for _, stream := range []string{"false", "true"} {
				status, code, body := fc.post(t, chat("pd", "bad", `, "max_tokens": 2, "stream": `+stream))
				if status != http.StatusBadRequest || code != answer.CodeEngineRejected || !strings.Contains(body, "Simulated failure.") {
					t.Errorf("stream %s: %d %s %s", stream, status, code, body)
				}
			}
			fc.inflightZero(t)
		})
	}
}

func (fc *fleetCase) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(fc.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
