package request

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/state/load"
)

// testModels are the models of a plan serving model "m" on one plain engine, with the
// tokenizer tok (nil: the stand-in).
func testModels(tb testing.TB, tok *plan.Tokenizer) *Models {
	tb.Helper()
	max := int64(1000)
	p := &plan.Plan{
		Engines: []plan.Engine{{ID: "E1", URL: "http://127.0.0.1:1", Model: "m", Role: plan.RolePlain, DPSize: 1}},
		Models: []plan.Model{{Name: "m", SessionIDHeader: "x-session-id", RoutingKeyHeader: "x-sgl-routing-key",
			Buckets: []plan.Bucket{{ID: "all", Limits: plan.Limits{Max: &max},
				Groups: plan.Groups{Plain: &plan.Group{Policy: plan.Policy{Type: plan.RoundRobin}}}}}}},
	}
	p.Models[0].Tokenizer = tok
	reg, err := engine.FromPlan(p.Engines)
	if err != nil {
		tb.Fatal(err)
	}
	deps, err := policy.NewDeps(p, load.NewTable(p.Engines, nil), nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ms, err := NewModels(p, reg, deps)
	if err != nil {
		tb.Fatal(err)
	}
	return ms
}

// longChat is a conversation of turns of 500 words, at least words in all, ending with
// a user turn.
func longChat(words int) []byte {
	var msgs []map[string]string
	for i := 0; i*500 < words; i++ {
		msgs = append(msgs, map[string]string{"role": [2]string{"user", "assistant"}[i%2], "content": strings.Repeat(fmt.Sprintf("w%d ", i), 500)})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": "and now?"})
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "max_tokens": 16})
	return body
}

// TestDecodeChatOnePass: the bodies clients send are decoded in the one pass (messages
// and parsed fields come back), and bodies it refuses get the strict decoder's error.
func TestDecodeChatOnePass(t *testing.T) {
	for _, body := range fuzzSeeds[:1] {
		if _, msgs, parsed, herr := decodeChat([]byte(body), nil); herr != nil || msgs == nil || parsed == nil || parsed.Messages == nil {
			t.Errorf("%s: not decoded in one pass (error %v)", body, herr)
		}
	}
	if _, msgs, _, herr := decodeChat(longChat(1<<10), nil); herr != nil || len(msgs) < 2 {
		t.Errorf("long chat: not decoded in one pass (error %v)", herr)
	}
	for body, want := range map[string]string{
		`{"model":"m","MODEL":"x","messages":[{"role":"user"}]}`:   `key "MODEL" in the top-level object: keys are case-sensitive, did you mean "model"?`,
		`{"model":"m","messages":[{"role":"user","role":"x"}]}`:    `duplicate key "role" in messages[0]`,
		`{"model":"m","messages":[{"role":"u"}],"max_tokens":"1"}`: `max_tokens: expected int64, got JSON string`,
		`{"model":"m","temperaturE":1,"messages":[{"role":"u"}]}`:  `did you mean "temperature"`,
		`{"model":"m","messages":[{"role":"u"}]`:                   `request body is not a JSON object`,
	} {
		_, _, _, herr := decodeChat([]byte(body), nil)
		if herr == nil || !strings.Contains(herr.Msg, want) {
			t.Errorf("%s: error %v, want it to contain %q", body, herr, want)
		}
	}
}

// BenchmarkDecodeCompletion decodes a completion request whose prompt is about 620 kB of
// English prose (the length of a 128k-token conversation) and reads its prompt, in one
// pass as the router does, and with the general strict decoder and encoding/json they
// replaced.
//
//	go test ./runtime/request -run '^$' -bench DecodeCompletion -benchmem
func BenchmarkDecodeCompletion(b *testing.B) {
	prose, err := os.ReadFile("../token/hf/testdata/text/prose.txt")
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat(string(prose), 620<<10/len(prose)+1)
	prompt, _ := json.Marshal(text)
	body := []byte(`{"model":"m","prompt":` + string(prompt) + `,"max_tokens":16,"temperature":0.7}`)
	for _, tc := range []struct {
		name   string
		decode func(*completionRequest) (prompts, *Error)
	}{
		{"one-pass", func(req *completionRequest) (prompts, *Error) {
			root, herr := decodeOnePass(body, req, completionFields)
			if herr != nil {
				return prompts{}, herr
			}
			return promptsOf(root, req.Prompt, "prompt")
		}},
		{"strict", func(req *completionRequest) (prompts, *Error) {
			if herr := decodeBody(body, req); herr != nil {
				return prompts{}, herr
			}
			return parsePrompts(req.Prompt, "prompt")
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var req completionRequest
				if in, herr := tc.decode(&req); herr != nil || len(in.texts) != 1 || in.texts[0] != text {
					b.Fatalf("%v, %d texts", herr, len(in.texts))
				}
			}
		})
	}
}
