package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/token"
)

// mixedPlan serves a plain model "m" on two engines and a PD model "pd".
func mixedPlan() *plan.Plan {
	return testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2"), pdEngine("P1", plan.RolePrefill, 8998), pdEngine("D1", plan.RoleDecode, 0)},
		plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all", MaxContextTokens: i64(4096), Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}}}},
		plan.Model{Name: "pd", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: group(plan.RoundRobin, plan.Admission{}), Decode: group(plan.RoundRobin, plan.Admission{}),
		}}}}})
}

// TestOpenAIClientEndpoints: the official Go client's completions (plain and streamed,
// plain and PD), embeddings and models.retrieve work through the router.
func TestOpenAIClientEndpoints(t *testing.T) {
	fc := startFleet(t, mixedPlan())
	c := fc.client()
	for _, model := range []string{"m", "pd"} {
		params := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model), MaxTokens: openai.Int(4),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}}
		got, err := c.Completions.New(testCtx(t), params)
		if err != nil {
			t.Fatalf("%s completion: %v", model, err)
		}
		if got.Object != "text_completion" || got.Usage.CompletionTokens != 4 || got.Choices[0].Text == "" || got.Choices[0].FinishReason != "length" {
			t.Errorf("%s completion: %s", model, got.RawJSON())
		}
		stream := c.Completions.NewStreaming(testCtx(t), params)
		var text strings.Builder
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				text.WriteString(ch.Text)
			}
		}
		if err := stream.Err(); err != nil || text.String() != got.Choices[0].Text {
			t.Errorf("%s streamed completion %q (%v), want %q", model, text.String(), err, got.Choices[0].Text)
		}
	}

	emb, err := c.Embeddings.New(testCtx(t), openai.EmbeddingNewParams{Model: "m",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"alpha", "beta"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 2 || len(emb.Data[0].Embedding) == 0 || slices.Equal(emb.Data[0].Embedding, emb.Data[1].Embedding) {
		t.Errorf("embeddings: %s", emb.RawJSON())
	}

	model, err := c.Models.Get(testCtx(t), "pd")
	if err != nil || model.ID != "pd" || model.Object != "model" {
		t.Errorf("models.retrieve: %v %+v", err, model)
	}
	if _, err := c.Models.Get(testCtx(t), "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("models.retrieve of an unknown model: %v", err)
	}
	fc.inflightZero(t)
}

// TestGenerate: SGLang's /generate, single and batch, plain and PD, JSON and SGLang's
// stream framing (cumulative text per event, then [DONE]).
func TestGenerate(t *testing.T) {
	fc := startFleet(t, mixedPlan())
	status, body := fc.postJSON(t, "/generate", `{"model": "m", "text": "Hello", "sampling_params": {"max_new_tokens": 3}}`)
	var one struct {
		Text     string `json:"text"`
		MetaInfo struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"meta_info"`
	}
	if err := json.Unmarshal(body, &one); err != nil || status != http.StatusOK || one.MetaInfo.CompletionTokens != 3 {
		t.Fatalf("generate: %d %s", status, body)
	}
	// The model field is the router's: the engine gets SGLang's request without it.
	sent := fc.sent.bodies(fc.srv.current().plan.Engines[0].URL)
	if len(sent) == 0 {
		sent = fc.sent.bodies(fc.srv.current().plan.Engines[1].URL)
	}
	if len(sent) != 1 || strings.Contains(string(sent[0]), `"model"`) {
		t.Errorf("engine got %q", sent)
	}

	status, body = fc.postJSON(t, "/generate", `{"model": "pd", "text": ["a b c", "d"], "sampling_params": {"max_new_tokens": 2}}`)
	var batch []json.RawMessage
	if err := json.Unmarshal(body, &batch); err != nil || status != http.StatusOK || len(batch) != 2 {
		t.Fatalf("pd batch generate: %d %s", status, body)
	}
	pre := fc.sent.bodies(fc.srv.current().plan.Engines[2].URL)
	var boot struct {
		Hosts []string `json:"bootstrap_host"`
		Ports []int    `json:"bootstrap_port"`
		Rooms []uint64 `json:"bootstrap_room"`
	}
	if err := json.Unmarshal(pre[len(pre)-1], &boot); err != nil || len(boot.Hosts) != 2 || len(boot.Ports) != 2 || len(boot.Rooms) != 2 || boot.Rooms[0] == boot.Rooms[1] {
		t.Errorf("batch bootstrap fields: %v %+v", err, boot)
	}

	resp, err := http.Post(fc.url+"/generate", "application/json", strings.NewReader(`{"model": "m", "input_ids": [1, 2, 3], "stream": true, "sampling_params": {"max_new_tokens": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("generate stream: %q", events)
	}
	var last struct{ Text string }
	_ = json.Unmarshal([]byte(events[len(events)-2]), &last)
	if strings.Count(last.Text, " ") != 3 {
		t.Errorf("the last event holds the whole text, got %q", last.Text)
	}
	fc.inflightZero(t)
}

// TestInputEndpoints: rerank, score and classify reach a plain engine; a PD-only model
// refuses them; the info endpoints answer from an engine.
func TestInputEndpoints(t *testing.T) {
	fc := startFleet(t, mixedPlan())
	tests := []struct {
		path, body string
		status     int
		want       string
	}{
		{"/v1/rerank", `{"model": "m", "query": "q", "documents": ["a", "b"]}`, 200, `"index"`},
		{"/v1/score", `{"model": "m", "query": "q", "items": ["a", "b"]}`, 200, `"scores"`},
		{"/classify", `{"model": "m", "text": "hello"}`, 200, `"embedding"`},
		{"/v1/embeddings", `{"model": "pd", "input": "x"}`, 400, `serves model \"pd\" on prefill/decode engines only`},
		{"/v1/embeddings", `{"model": "m", "input": []}`, 400, "input: a string, an array of strings"},
		{"/v1/completions", `{"model": "m", "prompt": [[1, 2], 3]}`, 400, "prompt[1]: a string or an array of token ids"},
		{"/v1/completions", `{"model": "m", "prompt": [[1, 2], "x"]}`, 400, "a batch is all strings or all token id arrays"},
		{"/v1/completions", `{"model": "m", "prompt": "x", "max_tokens": 5000}`, 400, "no_matching_bucket"},
		{"/generate", `{"model": "m", "text": "x", "input_ids": [1]}`, 400, "exactly one of text or input_ids"},
		{"/generate", `{"model": "m", "text": ["x", "y"], "sampling_params": [{"max_new_tokens": 1}]}`, 400, "1 objects for 2 prompts"},
		{"/generate", `{"text": "x"}`, 400, "model: required, one of m, pd"},
	}
	for _, tt := range tests {
		status, body := fc.postJSON(t, tt.path, tt.body)
		if status != tt.status || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", tt.path, tt.body, status, body, tt.status, tt.want)
		}
	}
	for _, path := range []string{"/health", "/get_model_info?model=m", "/get_server_info?model=pd"} {
		resp, err := http.Get(fc.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
	fc.inflightZero(t)
}

// TestGenerateInputIDsHitThePrefixOwner: input_ids are the token facts themselves, so a
// cache-aware model needs no tokenizer for exact prefix hits.
func TestGenerateInputIDsHitThePrefixOwner(t *testing.T) {
	p := qwenPlan()
	p.Models[0].Tokenizer = nil // the stand-in: input_ids need no tokenizer at all
	fc := startFleet(t, p)
	fc.warmKV(t)
	ids := make([]uint32, 96)
	for i := range ids {
		ids[i] = uint32(1000 + i)
	}
	raw, _ := json.Marshal(ids)
	body := `{"input_ids": ` + string(raw) + `, "sampling_params": {"max_new_tokens": 2}}`
	first := fc.engineOf(t, "/generate", body)
	wait.For(t, "the engine's KV events indexed", func() bool {
		return len(fc.srv.current().deps.KV.Lookup(ids, kv.DefaultBlockSize)) > 0
	})
	if got := fc.srv.current().deps.KV.LookupHashes(token.BlockHashes(ids, kv.DefaultBlockSize), kv.DefaultBlockSize); len(got) == 0 || got[0].Engine != first {
		t.Fatalf("index holds %+v, want %s", got, first)
	}
	for range 3 {
		if got := fc.engineOf(t, "/generate", body); got != first {
			t.Fatalf("repeated input_ids went to %s, want %s which holds the prefix", got, first)
		}
	}
}

// engineOf posts body to path and returns the engine it was dispatched to.
func (fc *fleetCase) engineOf(t *testing.T, path, body string) string {
	t.Helper()
	before := map[string]int{}
	for _, e := range fc.srv.current().plan.Engines {
		before[e.ID] = len(fc.sent.bodies(e.URL))
	}
	if status, resp := fc.postJSON(t, path, body); status != http.StatusOK {
		t.Fatalf("%s: %d %s", path, status, resp)
	}
	for _, e := range fc.srv.current().plan.Engines {
		if len(fc.sent.bodies(e.URL)) > before[e.ID] {
			return e.ID
		}
	}
	t.Fatalf("%s reached no engine", path)
	return ""
}
