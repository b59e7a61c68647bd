package request

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/routerkit/router/runtime/arena"
	"github.com/routerkit/router/runtime/plan"
)

// qwenDir holds Qwen3's tokenizer, the one the chat goldens were computed with.
const qwenDir = "../../testdata/tokenizers/qwen3"

// TestPrepareChatMatchesTheReference: every chat golden (Python Jinja2 as each engine
// renders, then transformers.js) prepared as a request, through the one-pass decode, the
// parsed template values and the token cache, twice, routes on the reference ids. The
// arenas are poisoned on release, so that the second pass reads garbage from anything
// the first kept of its decoded strings or prompt without a copy.
func TestPrepareChatMatchesTheReference(t *testing.T) {
	arena.Poison(true)
	defer arena.Poison(false)
	data, err := os.ReadFile("../token/hf/testdata/chat_goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var goldens []struct {
		Name                string   `json:"name"`
		Engine              string   `json:"engine"`
		AddGenerationPrompt bool     `json:"add_generation_prompt"`
		Messages            string   `json:"messages"`
		Tools               *string  `json:"tools"`
		Kwargs              *string  `json:"kwargs"`
		Request             *string  `json:"request"` // top-level fields SGLang reads
		IDs                 []uint32 `json:"ids"`
	}
	if err := json.Unmarshal(data, &goldens); err != nil {
		t.Fatal(err)
	}
	models := map[string]*Models{}
	for _, kind := range []plan.Kind{plan.KindSGLang, plan.KindVLLM} {
		models[string(kind)] = testModels(t, &plan.Tokenizer{Path: qwenDir + "/tokenizer.json.gz", Config: qwenDir + "/tokenizer_config.json", EngineKind: kind})
	}
	for _, g := range goldens {
		t.Run(g.Name, func(t *testing.T) {
			req := map[string]any{"model": "m", "messages": json.RawMessage(g.Messages), "add_generation_prompt": g.AddGenerationPrompt}
			if g.Tools != nil {
				req["tools"] = json.RawMessage(*g.Tools)
			}
			if g.Kwargs != nil {
				req["chat_template_kwargs"] = json.RawMessage(*g.Kwargs)
			}
			if g.Request != nil {
				var extra map[string]json.RawMessage
				if err := json.Unmarshal([]byte(*g.Request), &extra); err != nil {
					t.Fatal(err)
				}
				for k, v := range extra {
					req[k] = v
				}
			}
			body, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, msgs, parsed, herr := decodeChat(body, nil); herr != nil || msgs == nil || parsed == nil {
				t.Fatalf("not decoded in one pass: %v", herr)
			}
			for range 2 {
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
				p, err := models[g.Engine].Chat(r, body)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(p.Facts.TokenIDs, g.IDs) {
					t.Fatalf("ids differ from the reference\n got %v\nwant %v", p.Facts.TokenIDs, g.IDs)
				}
			}
		})
	}
}
