package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/explain"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/token"
)

const qwenDir = "../../testdata/tokenizers/qwen3"

// qwenPlan is a cache-aware model "m" on the Qwen3 tokenizer over two engines that publish
// KV events; the simulator loads the same tokenizer from the plan.
func qwenPlan() *plan.Plan {
	engines := []plan.Engine{plainEngine("E1"), plainEngine("E2")}
	for i := range engines {
		engines[i].KVEvents = &plan.KVEvents{Endpoint: "tcp://127.0.0.1:0"}
	}
	g := group(plan.CacheAware, plan.Admission{})
	g.Policy.MinMatchedTokens, g.Policy.SwitchMarginTokens = i64(32), i64(0)
	g.Policy.CandidateMinWorkers, g.Policy.CandidateRatio, g.Policy.CandidateMaxWorkers, g.Policy.MinLoadChoices = 2, 1, 2, 2
	g.Policy.PrefixSource = &plan.PrefixSource{Type: "local_index"}
	p := testPlan(engines, plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all", MaxContextTokens: i64(32768), Groups: plan.Groups{Plain: &g}}}})
	p.Models[0].Tokenizer = &plan.Tokenizer{Path: qwenDir + "/tokenizer.json.gz", Config: qwenDir + "/tokenizer_config.json", EngineKind: "sglang"}
	return p
}

// chatGolden is a chat request and the ids the reference implementations compute for it
// (Python Jinja2 as SGLang renders it, then transformers.js; see
// runtime/token/hf/testdata/gen_chat_goldens.mjs).
type chatGolden struct {
	Name     string   `json:"name"`
	Messages string   `json:"messages"`
	Tools    string   `json:"tools"`
	IDs      []uint32 `json:"ids"`
}

func referenceChat(t *testing.T, name string) chatGolden {
	t.Helper()
	data, err := os.ReadFile("../token/hf/testdata/chat_goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var goldens []chatGolden
	if err := json.Unmarshal(data, &goldens); err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no chat golden %q", name)
	return chatGolden{}
}

func (fc *fleetCase) postJSON(t *testing.T, path, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(fc.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestTokenizeMatchesTheReference: /v1/tokenize answers the reference ids for a prompt and
// a chat, and /v1/detokenize turns them back into the text.
func TestTokenizeMatchesTheReference(t *testing.T) {
	fc := startFleet(t, qwenPlan())
	ref := referenceChat(t, "qwen3/multi_turn_think/sglang")
	messages, want := ref.Messages, ref.IDs
	for _, path := range []string{"/v1/tokenize", "/tokenize"} {
		status, body := fc.postJSON(t, path, `{"model": "m", "messages": `+messages+`}`)
		var got struct {
			Tokens      []uint32 `json:"tokens"`
			Count       int      `json:"count"`
			MaxModelLen int      `json:"max_model_len"`
		}
		if err := json.Unmarshal(body, &got); err != nil || status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		if !slices.Equal(got.Tokens, want) || got.Count != len(want) || got.MaxModelLen != 32768 {
			t.Errorf("%s chat = %+v, want the reference %v (count %d, max_model_len 32768)", path, got, want, len(want))
		}
	}
	// Reference ids of the hf goldens "hello" and "sentence" (transformers.js).
	hello, sentence := []uint32{9707, 11, 1879, 0}, []uint32{785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13}
	status, body := fc.postJSON(t, "/v1/tokenize", `{"prompt": ["Hello, world!", "The quick brown fox jumps over the lazy dog."]}`)
	var batch struct {
		Tokens [][]uint32 `json:"tokens"`
		Count  []int      `json:"count"`
	}
	if err := json.Unmarshal(body, &batch); err != nil || status != http.StatusOK {
		t.Fatalf("batch: %d %s", status, body)
	}
	if len(batch.Tokens) != 2 || !slices.Equal(batch.Tokens[0], hello) || !slices.Equal(batch.Tokens[1], sentence) || !slices.Equal(batch.Count, []int{4, 10}) {
		t.Errorf("batch = %+v, want %v and %v", batch, hello, sentence)
	}
	status, body = fc.postJSON(t, "/v1/detokenize", `{"model": "m", "tokens": [9707, 11, 1879, 0]}`)
	var text struct{ Text, Prompt string }
	if err := json.Unmarshal(body, &text); err != nil || status != http.StatusOK || text.Text != "Hello, world!" || text.Prompt != text.Text {
		t.Errorf("detokenize = %d %s", status, body)
	}
}

func TestTokenizeErrors(t *testing.T) {
	fc := startFleet(t, qwenPlan())
	tests := []struct {
		name, path, body string
		status           int
		code, msg        string
	}{
		{"unknown model", "/v1/tokenize", `{"model": "x", "prompt": "hi"}`, 404, answer.CodeModelNotFound, `is not served by this router`},
		{"prompt and messages", "/v1/tokenize", `{"prompt": "hi", "messages": [{"role": "user", "content": "hi"}]}`, 400, answer.CodeInvalidRequest, "exactly one of prompt"},
		{"neither", "/v1/tokenize", `{"model": "m"}`, 400, answer.CodeInvalidRequest, "exactly one of prompt"},
		{"prompt of numbers", "/v1/tokenize", `{"prompt": [1, 2]}`, 400, answer.CodeInvalidRequest, "prompt: a string or an array of strings"},
		{"message without role", "/v1/tokenize", `{"messages": [{"content": "hi"}]}`, 400, answer.CodeInvalidRequest, "messages[0].role: required"},
		{"not JSON", "/v1/tokenize", `{"prompt": `, 400, answer.CodeInvalidJSON, "not a JSON object"},
		{"negative id", "/v1/detokenize", `{"tokens": [-1]}`, 400, answer.CodeInvalidRequest, "tokens[0]: -1 is not a token id"},
		{"id outside the vocabulary", "/v1/detokenize", `{"tokens": [9707, 99999999]}`, 400, answer.CodeInvalidRequest, "99999999"},
		{"no tokens", "/v1/detokenize", `{"model": "m"}`, 400, answer.CodeInvalidRequest, "tokens: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(fc.url+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || resp.Header.Get("X-Router-Error-Code") != tt.code || !strings.Contains(string(b), tt.msg) {
				t.Errorf("got %d %s %s, want %d %s containing %q", resp.StatusCode, resp.Header.Get("X-Router-Error-Code"), b, tt.status, tt.code, tt.msg)
			}
		})
	}
}

// TestStandinCannotDetokenize: a model on the stand-in vocabulary says why it cannot.
func TestStandinCannotDetokenize(t *testing.T) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}}}})
	fc := startFleet(t, p)
	status, body := fc.postJSON(t, "/v1/detokenize", `{"tokens": [1, 2]}`)
	if status != http.StatusNotImplemented || !strings.Contains(string(body), "configure the model's HuggingFace tokenizer") {
		t.Errorf("detokenize on the stand-in = %d %s", status, body)
	}
	status, body = fc.postJSON(t, "/v1/tokenize", `{"prompt": "Hello, world!"}`)
	if status != http.StatusOK || !strings.Contains(string(body), fmt.Sprint(token.Encode("Hello, world!")[0])) {
		t.Errorf("tokenize on the stand-in = %d %s", status, body)
	}
}

// TestRealTokenizerPrefixHits: with the Qwen3 tokenizer on both sides, the blocks the
// router hashes for a chat are SGLang's hashes of the reference ids, the engine that served
// a conversation publishes them, and the same conversation is then routed to it.
func TestRealTokenizerPrefixHits(t *testing.T) {
	fc := startFleet(t, qwenPlan())
	fc.warmKV(t)
	ref := referenceChat(t, "qwen3/tools_nested/sglang")
	want := ref.IDs
	chat := `{"model": "m", "max_tokens": 2, "messages": ` + ref.Messages + `, "tools": ` + ref.Tools + `}`

	status, body := fc.postJSON(t, "/admin/explain", chat)
	var x explain.Explanation
	if err := json.Unmarshal(body, &x); err != nil || status != http.StatusOK {
		t.Fatalf("explain: %d %s", status, body)
	}
	blocks := token.BlockHashes(want, kv.DefaultBlockSize)
	if x.InputTokens != int64(len(want)) || x.Tokens == nil || len(x.Tokens.Blocks) != 1 ||
		x.Tokens.Blocks[0].Count != len(blocks) || !slices.Equal(x.Tokens.Blocks[0].First, blocks[:4]) {
		t.Fatalf("explained tokens = %d %+v, want %d tokens and blocks %v", x.InputTokens, x.Tokens, len(want), blocks[:4])
	}

	first := fc.engineOf(t, "/v1/chat/completions", chat)
	wait.For(t, "the engine's KV events indexed", func() bool {
		return len(fc.srv.current().deps.KV.Lookup(want, kv.DefaultBlockSize)) > 0
	})
	for range 3 {
		if got := fc.engineOf(t, "/v1/chat/completions", chat); got != first {
			t.Fatalf("repeated conversation went to %s, want %s which holds its prefix", got, first)
		}
	}
}

// TestUnpredictablePromptIsServed: vLLM turns image parts into placeholders the router
// cannot reproduce; such a chat is still served, with an approximate count and no prefix
// hashes, rather than refused.
func TestUnpredictablePromptIsServed(t *testing.T) {
	p := qwenPlan()
	p.Models[0].Tokenizer.EngineKind = plan.KindVLLM
	fc := startFleet(t, p)
	body := `{"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": [
		{"type": "text", "text": "What is in this picture?"},
		{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}`
	status, _, resp := fc.post(t, body)
	if status != http.StatusOK {
		t.Fatalf("multimodal chat: %d %s", status, resp)
	}
	// The decision is recorded as the handler returns, which may be after the client
	// has read the answer.
	var d []control.Decision
	wait.For(t, "the request's decision", func() bool { d = fc.srv.recent.list(); return len(d) > 0 })
	if last := d[len(d)-1]; last.InputTokens <= 0 || last.Status != http.StatusOK {
		t.Errorf("decision: %+v", last)
	}
	status, body2 := fc.postJSON(t, "/admin/explain", body)
	var x explain.Explanation
	if err := json.Unmarshal(body2, &x); err != nil || status != http.StatusOK || x.Tokens != nil || x.InputTokens <= 0 {
		t.Errorf("explain of a multimodal chat: %d %s", status, body2)
	}
}
