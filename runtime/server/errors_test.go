package server

import (
	"encoding/json"

	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/sim"
)

func fallPlan() *plan.Plan {
	e3, e4 := plainEngine("E3"), plainEngine("E4")
	e3.Model, e4.Model = "tiny", "empty"
	return testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2"), e3, e4},
		plan.Model{Name: "m", Buckets: []plan.Bucket{
			{ID: "short", Rank: 1, Groups: plan.Groups{Plain: ptr(group(plan.PowerOfTwo, plan.Admission{MaxInflightRequests: 1}, "E1"))}},
			{ID: "long", Rank: 2, Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}, "E2"))}},
		}},
		plan.Model{Name: "tiny", Buckets: []plan.Bucket{
			{ID: "t", Limits: plan.Limits{Max: i64(5)}, Groups: plan.Groups{Plain: ptr(group(plan.Random, plan.Admission{}))}},
		}},
		plan.Model{Name: "empty", Buckets: []plan.Bucket{
			{ID: "e", Groups: plan.Groups{Plain: ptr(group(plan.Random, plan.Admission{}, []string{}...))}},
		}},
	)
}

func TestFallThroughAndErrorStatuses(t *testing.T) {
	p := fallPlan()
	fc := startFleet(t, p)

	// Hold E1's only admission slot with a request that hangs.
	if err := fc.fleet.Engine("E1").SetFaults(sim.Faults{Hang: true}); err != nil {
		t.Fatal(err)
	}
	holdCtx, release := contextWithCancel(t)
	held := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(holdCtx, http.MethodPost, fc.url+"/v1/chat/completions", strings.NewReader(chat("m", "hold", "")))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	wait.For(t, "E1 in flight", func() bool { return fc.srv.reg.Get("E1").Inflight() == 1 })

	status, _, body := fc.post(t, chat("m", "next", `, "max_tokens": 2`))
	if status != http.StatusOK {
		t.Fatalf("fall-through: status %d: %s", status, body)
	}
	if n := len(fc.sent.bodies(p.Engines[1].URL)); n != 1 {
		t.Errorf("the second request must reach E2 through the long bucket, E2 got %d", n)
	}
	st := fc.state(t)
	if b := st.bucket("m", "short"); b.Fallthroughs != 1 {
		t.Errorf("short bucket fall-throughs = %v, want 1", b.Fallthroughs)
	}
	if e := st.engine("E1"); e.Rejections != 1 {
		t.Errorf("E1 admission rejections = %v, want 1", e.Rejections)
	}

	big := `{"model": "m", "messages": [{"role": "user", "content": "` + strings.Repeat("x", request.MaxBodyBytes) + `"}]}`
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"body over 32 MiB", big, 413, answer.CodeBodyTooLarge},
		{"malformed json", `{"model": "m", `, 400, answer.CodeInvalidJSON},
		{"bad sampling", chat("m", "x", `, "temperature": 3`), 400, answer.CodeInvalidRequest},
		{"wrong type", chat("m", "x", `, "max_tokens": "ten"`), 400, answer.CodeInvalidRequest},
		{"no messages", `{"model": "m", "messages": []}`, 400, answer.CodeInvalidRequest},
		{"token count overflow", chat("m", "x", `, "max_tokens": 9223372036854775807`), 400, "token_count_overflow"},
		{"unknown model", chat("nope", "x", ""), 404, answer.CodeModelNotFound},
		{"no bucket fits", chat("tiny", "far too many words for this tiny bucket", ""), 400, "no_matching_bucket"},
		{"no candidates", chat("empty", "x", ""), 503, "no_plain_engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code, body := fc.post(t, tc.body)
			if status != tc.status || code != tc.code {
				t.Errorf("got %d %q, want %d %q: %.300s", status, code, tc.status, tc.code, body)
			}
			var e struct {
				Error struct{ Message, Type, Code string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != tc.code || e.Error.Message == "" {
				t.Errorf("body is not an OpenAI error with code %s: %.300s", tc.code, body)
			}
		})
	}

	release()
	<-held
	fc.inflightZero(t)
}

func TestAdmissionExhaustion(t *testing.T) {
	p := fallPlan()
	p.Models[0].Buckets[1].Groups.Plain.Policy.Admission.MaxInflightRequests = 1
	fc := startFleet(t, p)
	for _, id := range []string{"E1", "E2"} {
		_ = fc.fleet.Engine(id).SetFaults(sim.Faults{Hang: true})
	}
	// Admission observes without reserving, so the two holding requests go one at a time:
	// the first takes E1's slot, the second falls through to E2's.
	ctx, release := contextWithCancel(t)
	var wg sync.WaitGroup
	for _, id := range []string{"E1", "E2"} {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fc.url+"/v1/chat/completions", strings.NewReader(chat("m", "hold", "")))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
		wait.For(t, id+" full", func() bool { return fc.srv.reg.Get(id).Inflight() == 1 })
	}
	status, code, body := fc.post(t, chat("m", "one more", ""))
	if status != 503 || code != "admission_rejected" || !strings.Contains(body, "short") || !strings.Contains(body, "long") {
		t.Errorf("got %d %s: %s", status, code, body)
	}
	release()
	wg.Wait()
	fc.inflightZero(t)
}

func TestEngineDownAfterSelectionIs502(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	p.Health.IntervalMS = 3_600_000 // the router keeps believing the engine is up
	fc := startFleet(t, p)
	if err := fc.fleet.Close(); err != nil {
		t.Fatal(err)
	}
	status, code, body := fc.post(t, chat("m", "anyone there?", ""))
	if status != 502 || code != answer.CodeEngineError || !strings.Contains(body, "E1") {
		t.Errorf("got %d %s: %s", status, code, body)
	}
	fc.inflightZero(t)
}

func TestEngineErrorsAreRouterShaped(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	for _, tc := range []struct {
		engine, want int
		code         string
	}{
		{503, http.StatusBadGateway, answer.CodeEngineError},
		{429, http.StatusTooManyRequests, answer.CodeEngineRejected},
	} {
		_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{FailStatus: tc.engine})
		status, code, body := fc.post(t, chat("m", "x", ""))
		var e struct {
			Error struct{ Message, Type, Code string } `json:"error"`
		}
		if status != tc.want || code != tc.code || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != tc.code ||
			!strings.HasPrefix(e.Error.Message, fmt.Sprintf("engine E1 answered %d ", tc.engine)) {
			t.Errorf("engine %d: got %d %s: %s", tc.engine, status, code, body)
		}
	}
}

func TestInterimResponsesAreNotTheStatus(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	status, _, body := fc.post(t, chat("m", "continue?", `, "max_tokens": 1`), "Expect", "100-continue")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if d := fc.state(t).Decisions[0]; d.Status != 200 {
		t.Errorf("recorded status %d, want 200", d.Status)
	}
}

func TestUnknownRoutesAreRouterShaped(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/v1/chat/completions", 405, answer.CodeMethod},
		{http.MethodGet, "/v1/completions", 405, answer.CodeMethod},
		{http.MethodPost, "/v1/responses", 404, answer.CodeNotFound},
		{http.MethodGet, "/v1/models/nope", 404, answer.CodeModelNotFound},
	} {
		req, _ := http.NewRequest(tc.method, fc.url+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("X-Router-Error-Code") != tc.code {
			t.Errorf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("X-Router-Error-Code"))
		}
	}
}
