package server

import (
	"bufio"
	"encoding/json"

	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/answer"
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

// Both client transports: a stream arrives as the engine makes it, and a client that
// leaves mid-stream ends the engine's request.
func TestStreamCutAndClientCancelReleaseInflight(t *testing.T) {
	forClientTransports(t, func(t *testing.T, kind plan.ClientTransport) {
		p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
			{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
		}})
		p.ClientTransport = kind
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
	})
}

func TestUnhealthyEngineLeavesCandidates(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
	fc := startFleet(t, p)
	_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{Unhealthy: true})
	wait.For(t, "E1 unhealthy", func() bool { return !fc.srv.reg.Get("E1").Healthy() })
	for range 4 {
		if status, _, body := fc.post(t, chat("m", "hi", `, "max_tokens": 1`)); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	if n := len(fc.sent.bodies(p.Engines[0].URL)); n != 0 {
		t.Errorf("unhealthy E1 got %d requests", n)
	}
	_ = fc.fleet.Engine("E1").SetFaults(sim.Faults{})
	wait.For(t, "E1 back", func() bool { return fc.srv.reg.Get("E1").Healthy() })
	for range 2 {
		fc.post(t, chat("m", "hi", `, "max_tokens": 1`))
	}
	if n := len(fc.sent.bodies(p.Engines[0].URL)); n == 0 {
		t.Error("E1 must return to the rotation when healthy")
	}
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
		if status != http.StatusBadGateway || code != answer.CodePrefillError || !strings.Contains(body, "prefill engine P1 answered 500") {
			t.Errorf("stream %s: got %d %s: %s", stream, status, code, body)
		}
	}
	fc.inflightZero(t)
	st := fc.state(t)
	if d := st.Decisions[0]; d.Status != http.StatusBadGateway || !strings.Contains(d.Error, "prefill_error") {
		t.Errorf("decision: %+v", d)
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
	if d.Status != 200 || !strings.Contains(d.Error, "engine E1: connection failed") {
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
