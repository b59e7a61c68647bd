package server

import (
	"bufio"
	"encoding/json"

	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

func chat(model, content string, extra string) string {
	return fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": %q}]%s}`, model, content, extra)
}

func TestPlainWithOpenAIClient(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.PowerOfTwo, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	c := fc.client()
	params := openai.ChatCompletionNewParams{Model: "m", MaxTokens: openai.Int(4),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}}

	got, err := c.Chat.Completions.New(testCtx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage.CompletionTokens != 4 || got.Choices[0].FinishReason != "length" || got.Choices[0].Message.Content == "" {
		t.Errorf("completion: %s", got.RawJSON())
	}

	stream := c.Chat.Completions.NewStreaming(testCtx(t), params)
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 4 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "length" {
		t.Errorf("stream: %d chunks, %+v", chunks, acc.Choices)
	}
	fc.inflightZero(t)
}

func TestPDBothHalvesShareTheRoomAndDecodeAnswers(t *testing.T) {
	p := testPlan([]plan.Engine{pdEngine("P1", plan.RolePrefill, 8998), pdEngine("D1", plan.RoleDecode, 0)},
		plan.Model{Name: "pd", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: group(plan.RoundRobin, plan.Admission{}), Decode: group(plan.PowerOfTwo, plan.Admission{}),
		}}}}})
	fc := startFleet(t, p)

	// The client's own bootstrap fields are overwritten.
	status, _, body := fc.post(t, chat("pd", "Hello, disaggregated world.", `, "max_tokens": 5, "bootstrap_room": 7, "bootstrap_host": "evil"`))
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	// A prefill engine generates one token; the answer with all five is the decode's.
	if resp.Usage.CompletionTokens != 5 {
		t.Errorf("answer is not the decode engine's: %s", body)
	}
	pre, dec := fc.sent.bodies(p.Engines[0].URL), fc.sent.bodies(p.Engines[1].URL)
	if len(pre) != 1 || len(dec) != 1 {
		t.Fatalf("want one request to each half, got prefill %d decode %d", len(pre), len(dec))
	}
	type boot struct {
		Host string `json:"bootstrap_host"`
		Port int    `json:"bootstrap_port"`
		Room uint64 `json:"bootstrap_room"`
	}
	var bp, bd boot
	_ = json.Unmarshal(pre[0], &bp)
	_ = json.Unmarshal(dec[0], &bd)
	if bp != bd || bp.Host != "127.0.0.1" || bp.Port != 8998 || bp.Room == 7 || bp.Room >= 1<<63 {
		t.Errorf("bootstrap fields: prefill %+v decode %+v", bp, bd)
	}

	// Streaming through PD works with the OpenAI client too.
	c := fc.client()
	stream := c.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{
		Model: "pd", MaxTokens: openai.Int(3), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stream it.")}})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].FinishReason != "length" {
		t.Errorf("pd stream: %v %+v", err, acc.Choices)
	}
	fc.inflightZero(t)
}

// fallPlan has a short bucket on E1 capped at one in-flight request and a long bucket
// on E2, plus models that fail selection in each way serving distinguishes.
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
	waitFor(t, "E1 in flight", func() bool { return fc.srv.reg.Get("E1").Inflight() == 1 })

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

	big := `{"model": "m", "messages": [{"role": "user", "content": "` + strings.Repeat("x", maxBodyBytes) + `"}]}`
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"body over 32 MiB", big, 413, codeBodyTooLarge},
		{"malformed json", `{"model": "m", `, 400, codeInvalidJSON},
		{"bad sampling", chat("m", "x", `, "temperature": 3`), 400, codeInvalidRequest},
		{"wrong type", chat("m", "x", `, "max_tokens": "ten"`), 400, codeInvalidRequest},
		{"no messages", `{"model": "m", "messages": []}`, 400, codeInvalidRequest},
		{"token count overflow", chat("m", "x", `, "max_tokens": 9223372036854775807`), 400, "token_count_overflow"},
		{"unknown model", chat("nope", "x", ""), 404, codeModelNotFound},
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
		waitFor(t, id+" full", func() bool { return fc.srv.reg.Get(id).Inflight() == 1 })
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
	if status != 502 || code != codeEngineError || !strings.Contains(body, "E1") {
		t.Errorf("got %d %s: %s", status, code, body)
	}
	fc.inflightZero(t)
}

func TestStreamCutAndClientCancelReleaseInflight(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	e1 := fc.fleet.Engine("E1")

	// The engine cuts the stream: the client gets an error event, not a silent cut.
	_ = e1.SetFaults(sim.Faults{CutStream: true, CutAfterTokens: 2})
	status, _, body := fc.post(t, chat("m", "tell me more", `, "stream": true, "max_tokens": 20`))
	if status != 200 || !strings.Contains(body, `"code":"engine_error"`) || strings.Contains(body, "[DONE]") {
		t.Errorf("cut stream: %d %s", status, body)
	}
	fc.inflightZero(t)

	// The client goes away mid-stream.
	_ = e1.SetFaults(sim.Faults{Slowdown: 100})
	ctx, cancel := contextWithCancel(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fc.url+"/v1/chat/completions",
		strings.NewReader(chat("m", "a long story please", `, "stream": true, "max_tokens": 2000`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if fc.srv.reg.Get("E1").Inflight() != 1 {
		t.Error("the streaming request must be in flight")
	}
	cancel()
	resp.Body.Close()
	fc.inflightZero(t)
}

func TestUnhealthyEngineLeavesCandidates(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{Unhealthy: true})
	waitFor(t, "E1 unhealthy", func() bool { return !fc.srv.reg.Get("E1").Healthy() })
	for range 4 {
		if status, _, body := fc.post(t, chat("m", "hi", `, "max_tokens": 1`)); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	if n := len(fc.sent.bodies(p.Engines[0].URL)); n != 0 {
		t.Errorf("unhealthy E1 got %d requests", n)
	}
	_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{})
	waitFor(t, "E1 back", func() bool { return fc.srv.reg.Get("E1").Healthy() })
	for range 2 {
		fc.post(t, chat("m", "hi", `, "max_tokens": 1`))
	}
	if n := len(fc.sent.bodies(p.Engines[0].URL)); n == 0 {
		t.Error("E1 must return to the rotation when healthy")
	}
}

func TestShutdownDrains(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	// Slow enough (about a second) that the request is surely in flight when shutdown starts.
	_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{Slowdown: 500})
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(fc.url+"/v1/chat/completions", "application/json", strings.NewReader(chat("m", "finish me", `, "max_tokens": 8`)))
		if err != nil {
			done <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	waitFor(t, "request in flight", func() bool { return fc.srv.reg.Get("E1").Inflight() == 1 })
	fc.stop()
	if status := <-done; status != 200 {
		t.Errorf("in-flight request during shutdown: status %d, want 200", status)
	}
	if err := <-fc.served; err != nil {
		t.Errorf("serve after drain: %v", err)
	}
	fc.served <- nil // for the cleanup
	if _, err := http.Get(fc.url + "/healthz"); err == nil {
		t.Error("a drained router must not accept new connections")
	}
}

func TestAdminTokenAndExplain(t *testing.T) {
	p := fallPlan()
	p.AdminToken = "s3cret"
	fc := startFleet(t, p)
	req, _ := http.NewRequest(http.MethodGet, fc.url+"/admin/state", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("X-Router-Error-Code") != codeUnauthorized {
		t.Errorf("without token: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, fc.url+"/admin/explain", strings.NewReader(chat("m", "explain me", `, "max_tokens": 3`)))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ex explain.Explanation
	if err := json.NewDecoder(resp.Body).Decode(&ex); err != nil {
		t.Fatal(err)
	}
	if ex.Bucket == nil || *ex.Bucket != "short" || ex.Picks[plan.RolePlain] != "E1" || len(ex.Attempts) != 1 {
		t.Errorf("explain: %+v", ex)
	}
	if n := len(fc.sent.bodies(p.Engines[0].URL)); n != 0 {
		t.Errorf("explain must not dispatch, E1 got %d requests", n)
	}
}

// state fetches /admin/state.
func (fc *fleetCase) state(t *testing.T) *State {
	t.Helper()
	resp, err := http.Get(fc.url + "/admin/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func (s *State) bucket(model, id string) BucketState {
	for _, b := range s.Buckets {
		if b.Model == model && b.ID == id {
			return b
		}
	}
	return BucketState{}
}

func (s *State) engine(id string) EngineState {
	for _, e := range s.Engines {
		if e.ID == id {
			return e
		}
	}
	return EngineState{}
}

func ptr[T any](v T) *T { return &v }

func TestPrefillFailureIsAnErrorNotADecode200(t *testing.T) {
	p := testPlan([]plan.Engine{pdEngine("P1", plan.RolePrefill, 8998), pdEngine("D1", plan.RoleDecode, 0)},
		plan.Model{Name: "pd", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: group(plan.RoundRobin, plan.Admission{}), Decode: group(plan.PowerOfTwo, plan.Admission{}),
		}}}}})
	fc := startFleet(t, p)
	_ = fc.fleet.Engine("P1").SetFaults(sim.Faults{FailStatus: 500})
	for _, stream := range []string{"false", "true"} {
		status, code, body := fc.post(t, chat("pd", "prefill will fail", `, "max_tokens": 4, "stream": `+stream))
		if status != http.StatusBadGateway || code != codePrefillError || !strings.Contains(body, "prefill engine P1 failed") {
			t.Errorf("stream %s: got %d %s: %s", stream, status, code, body)
		}
	}
	fc.inflightZero(t)
	st := fc.state(t)
	if d := st.Decisions[0]; d.Status != http.StatusBadGateway || !strings.Contains(d.Error, "prefill_error") {
		t.Errorf("decision: %+v", d)
	}
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
		{503, http.StatusBadGateway, codeEngineError},
		{429, http.StatusTooManyRequests, codeEngineRejected},
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

func TestStreamFailureIsRecorded(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{CutStream: true, CutAfterTokens: 1})
	fc.post(t, chat("m", "cut me", `, "stream": true, "max_tokens": 10`))
	d := fc.state(t).Decisions[0]
	if d.Status != 200 || !strings.Contains(d.Error, "engine E1 stream failed") {
		t.Errorf("decision: %+v", d)
	}
	resp, err := http.Get(fc.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(m), `router_stream_failures_total{bucket="all",code="engine_error",model="m"} 1`) {
		t.Error("the stream failure is not counted")
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
		{http.MethodGet, "/v1/chat/completions", 405, codeMethod},
		{http.MethodPost, "/v1/completions", 404, codeNotFound},
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
