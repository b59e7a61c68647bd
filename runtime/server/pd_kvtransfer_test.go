package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// vllmPDPlan is a PD model "pd" on vLLM-kind engines speaking kv_transfer_params.
func vllmPDPlan() *plan.Plan {
	engines := []plan.Engine{pdEngine("P1", plan.RolePrefill, 0), pdEngine("D1", plan.RoleDecode, 0)}
	for i := range engines {
		engines[i].Kind, engines[i].PDProtocol = plan.KindVLLM, plan.PDKVTransferParams
		engines[i].Load = plan.LoadSource{Source: "metrics", IntervalMS: 20, StaleAfterMS: 2000}
	}
	return testPlan(engines, plan.Model{Name: "pd", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{PD: &plan.PDGroups{
		Prefill: group(plan.RoundRobin, plan.Admission{}), Decode: group(plan.RoundRobin, plan.Admission{}),
	}}}}})
}

// TestVLLMDisaggregation: the prefill half is asked for a remote decode (max_tokens 1, no
// stream, kv_transfer_params) and answers the hand-over; the decode half carries it and
// answers the client, streamed or not; the simulated decode engine refuses a hand-over
// it was not given, so a router that skipped a step would fail here.
func TestVLLMDisaggregation(t *testing.T) {
	p := vllmPDPlan()
	fc := startFleet(t, p)
	status, _, body := fc.post(t, chat("pd", "Hand the KV over.", `, "max_tokens": 5, "stream_options": null`))
	if status != http.StatusOK || !strings.Contains(body, `"completion_tokens":5`) {
		t.Fatalf("chat: %d %s", status, body)
	}
	pre, dec := fc.sent.bodies(p.Engines[0].URL), fc.sent.bodies(p.Engines[1].URL)
	if len(pre) != 1 || len(dec) != 1 {
		t.Fatalf("want one request to each half, got prefill %d decode %d", len(pre), len(dec))
	}
	var pb, db struct {
		MaxTokens int             `json:"max_tokens"`
		Stream    bool            `json:"stream"`
		KV        json.RawMessage `json:"kv_transfer_params"`
		Bootstrap *uint64         `json:"bootstrap_room"`
	}
	_ = json.Unmarshal(pre[0], &pb)
	_ = json.Unmarshal(dec[0], &db)
	if pb.MaxTokens != 1 || pb.Stream || !strings.Contains(string(pb.KV), `"do_remote_decode":true`) || pb.Bootstrap != nil {
		t.Errorf("prefill request: %s", pre[0])
	}
	if db.MaxTokens != 5 || !strings.Contains(string(db.KV), `"do_remote_prefill":true`) || db.Bootstrap != nil {
		t.Errorf("decode request: %s", dec[0])
	}

	c := fc.client()
	stream := c.Chat.Completions.NewStreaming(testCtx(t), openai.ChatCompletionNewParams{
		Model: "pd", MaxTokens: openai.Int(3), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stream it.")}})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != 3 && acc.Choices[0].Message.Content == "" {
		t.Errorf("streamed vLLM PD: %v %+v", err, acc.Choices)
	}
	fc.inflightZero(t)
}

// TestVLLMDisaggregationFailures: a prefill's 4xx reaches the client as 4xx and no decode
// is sent; a prefill failure is the engine's error.
func TestVLLMDisaggregationFailures(t *testing.T) {
	p := vllmPDPlan()
	fc := startFleet(t, p)
	status, _, body := fc.post(t, `{"model": "pd", "messages": [{"role": "robot", "content": "x"}]}`)
	if status != http.StatusBadRequest || !strings.Contains(body, "robot") {
		t.Errorf("a request the prefill refuses: %d %s", status, body)
	}
	if n := len(fc.sent.bodies(p.Engines[1].URL)); n != 0 {
		t.Errorf("the decode engine got %d requests after the prefill refused", n)
	}
	if err := fc.fleet.Engine("P1").SetFaults(sim.Faults{FailRate: 1, FailStatus: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}
	status, code, body := fc.post(t, chat("pd", "x", `, "max_tokens": 3`))
	if status != http.StatusBadGateway || code == "" {
		t.Errorf("failing prefill: %d %s %s", status, code, body)
	}
	fc.inflightZero(t)
}

// TestVLLMDisaggregationMinTokens: a client's min_tokens stays off the one-token prefill
// half, which vLLM would refuse (min_tokens above max_tokens, vllm/sampling_params.py
// SamplingParams._verify_args; the simulated engine refuses it too), and reaches the
// decode half, as vLLM's proxy does (vllm-project/vllm
// tests/v1/kv_connector/nixl_integration/toy_proxy_server.py at 030ea52e,
// send_request_to_service pops min_tokens and min_completion_tokens).
func TestVLLMDisaggregationMinTokens(t *testing.T) {
	p := vllmPDPlan()
	fc := startFleet(t, p)
	status, _, body := fc.post(t, chat("pd", "At least three.", `, "max_completion_tokens": 5, "min_tokens": 3, "min_completion_tokens": 3`))
	if status != http.StatusOK || !strings.Contains(body, `"completion_tokens":5`) {
		t.Fatalf("chat with min_tokens: %d %s", status, body)
	}
	pre, dec := fc.sent.bodies(p.Engines[0].URL), fc.sent.bodies(p.Engines[1].URL)
	if len(pre) != 1 || len(dec) != 1 {
		t.Fatalf("want one request to each half, got prefill %d decode %d", len(pre), len(dec))
	}
	var pb, db map[string]json.RawMessage
	_ = json.Unmarshal(pre[0], &pb)
	_ = json.Unmarshal(dec[0], &db)
	if _, ok := pb["min_tokens"]; ok || pb["min_completion_tokens"] != nil || string(pb["max_completion_tokens"]) != "1" {
		t.Errorf("prefill request: %s", pre[0])
	}
	if string(db["min_tokens"]) != "3" || string(db["min_completion_tokens"]) != "3" || string(db["max_completion_tokens"]) != "5" {
		t.Errorf("decode request: %s", dec[0])
	}
	fc.inflightZero(t)
}
