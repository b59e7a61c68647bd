package server

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// fastTimeouts are short dispatch deadlines, so a fault costs a test well under a second.
var fastTimeouts = plan.Timeouts{ConnectMS: 1000, FirstByteMS: 1000, StreamIdleMS: 1000, TotalMS: 8000, PrefillStatusMS: 1500, BodyReadMS: 1000}

// matrixFault is one simulator fault and what a client gets, per topology, for a stream
// and a plain answer. Several statuses are allowed where the outcome depends on which
// PD half notices first; 200 in a stream list means an error event ends the stream.
type matrixFault struct {
	name   string
	faults sim.Faults
	kill   bool
	want   map[string][2][]int // topology -> {non-stream, stream}
}

var faultMatrix = []matrixFault{
	{name: "hang", faults: sim.Faults{Hang: true}, want: map[string][2][]int{
		"plain": {{504}, {504}}, "pd-prefill": {{504}, {504}}, "pd-decode": {{504}, {504}}}},
	{name: "5xx", faults: sim.Faults{FailStatus: 500}, want: map[string][2][]int{
		"plain": {{502}, {502}}, "pd-prefill": {{502}, {502}}, "pd-decode": {{502}, {502}}}},
	{name: "429", faults: sim.Faults{FailStatus: 429}, want: map[string][2][]int{
		"plain": {{429}, {429}}, "pd-prefill": {{429}, {429}}, "pd-decode": {{429}, {429}}}},
	{name: "cut stream", faults: sim.Faults{CutStream: true, CutAfterTokens: 2}, want: map[string][2][]int{
		"plain": {{502}, {200}}, "pd-prefill": {{502}, {200, 502}}, "pd-decode": {{502}, {200}}}},
	{name: "slow first byte", faults: sim.Faults{FirstByteDelayMS: 3000}, want: map[string][2][]int{
		"plain": {{504}, {504}}, "pd-prefill": {{504}, {504}}, "pd-decode": {{504}, {504}}}},
	{name: "garbage body", faults: sim.Faults{GarbageBody: true}, want: map[string][2][]int{
		"plain": {{502}, {502}}, "pd-prefill": {{502}, {502}}, "pd-decode": {{502}, {502}}}},
	{name: "stale load", faults: sim.Faults{StaleLoad: true}, want: map[string][2][]int{
		"plain": {{200}, {200}}, "pd-prefill": {{200}, {200}}, "pd-decode": {{200}, {200}}}},
	{name: "kill", kill: true, want: map[string][2][]int{
		"plain": {{502}, {502}}, "pd-prefill": {{502}, {502}}, "pd-decode": {{502}, {502}}}},
}

// matrixPlan is one engine per role, health checks too slow to notice a fault (the
// dispatch path must), and the fast deadlines.
func matrixPlan(topology string) *plan.Plan {
	var p *plan.Plan
	if topology == "plain" {
		p = plainPlan("E1")
	} else {
		p = pdPlan()
	}
	p.Health.IntervalMS = 3_600_000
	p.Timeouts = fastTimeouts
	return p
}

func pdPlan() *plan.Plan {
	return testPlan([]plan.Engine{pdEngine("P1", plan.RolePrefill, 8998), pdEngine("D1", plan.RoleDecode, 0)},
		plan.Model{Name: "pd", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: group(plan.RoundRobin, plan.Admission{}), Decode: group(plan.RoundRobin, plan.Admission{}),
		}}}}})
}

// TestFaultMatrix runs every simulator fault against plain and PD (the fault on either
// half), streamed and not, and checks the client's status, that the router's in-flight
// counts return to zero, and that nothing is left running afterwards.
func TestFaultMatrix(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("cases", func(t *testing.T) {
		for _, f := range faultMatrix {
			for _, topology := range []string{"plain", "pd-prefill", "pd-decode"} {
				for i, stream := range []bool{false, true} {
					name := f.name + "/" + topology + map[bool]string{false: "/json", true: "/stream"}[stream]
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						runMatrixCase(t, f, topology, stream, f.want[topology][i])
					})
				}
			}
		}
	})
	http.DefaultClient.CloseIdleConnections()
	if !wait.Until(func() bool { return runtime.NumGoroutine() <= before+2 }) {
		n := runtime.NumGoroutine()
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before the matrix, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

func runMatrixCase(t *testing.T, f matrixFault, topology string, stream bool, want []int) {
	p := matrixPlan(topology)
	fc := startFleet(t, p)
	target, model := "E1", "m"
	switch topology {
	case "pd-prefill":
		target, model = "P1", "pd"
	case "pd-decode":
		target, model = "D1", "pd"
	}
	e := fc.fleet.Engine(target)
	if f.kill {
		if err := e.Kill(); err != nil {
			t.Fatal(err)
		}
	} else if err := e.SetFaults(f.faults); err != nil {
		t.Fatal(err)
	}
	extra := `, "max_tokens": 8`
	if stream {
		extra += `, "stream": true`
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fc.url+"/v1/chat/completions", strings.NewReader(chat(model, "fault matrix", extra)))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("answer cut: %v", err)
	}
	if !slices.Contains(want, resp.StatusCode) {
		t.Errorf("status %d, want one of %v: %.300s", resp.StatusCode, want, body)
	}
	if resp.StatusCode != 200 && (resp.Header.Get("X-Router-Error-Code") == "" || !strings.Contains(string(body), "request id")) {
		t.Errorf("error without the router's shape: %v %.300s", resp.Header, body)
	}
	if resp.StatusCode == 200 && f.name != "stale load" && !strings.Contains(string(body), `"error"`) {
		t.Errorf("a failed stream ended without an error event: %.300s", body)
	}
	if resp.StatusCode == 200 && f.name == "stale load" && strings.Contains(string(body), `"error"`) {
		t.Errorf("a working engine's answer has an error: %.300s", body)
	}
	if strings.Contains(string(body), "127.0.0.1") {
		t.Errorf("the answer names an engine URL: %.300s", body)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("answer took %v", took)
	}
	fc.inflightZero(t)
}
