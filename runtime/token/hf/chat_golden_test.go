package hf

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
)

// chatGolden is a chat request with the ids the reference implementations compute for it
// (testdata/gen_chat_goldens.mjs).
type chatGolden struct {
	Name                string  `json:"name"`
	Engine              string  `json:"engine"`
	AddGenerationPrompt bool    `json:"add_generation_prompt"`
	Messages            string  `json:"messages"`
	Tools               *string `json:"tools"`
	Kwargs              *string `json:"kwargs"`
	Request             *string `json:"request"` // top-level fields SGLang reads
	IDs                 []uint32
}

func (g *chatGolden) UnmarshalJSON(data []byte) error {
	type plain chatGolden
	var v struct {
		plain
		IDs []uint32 `json:"ids"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*g = chatGolden(v.plain)
	g.IDs = v.IDs
	return nil
}

// TestChatGoldens renders and encodes chat requests end to end, as the router does for a
// model with the Qwen3 tokenizer, and compares with the ids of Python Jinja2 (as HF
// transformers and each engine) followed by transformers.js.
func TestChatGoldens(t *testing.T) {
	data, err := os.ReadFile("testdata/chat_goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var goldens []chatGolden
	if err := json.Unmarshal(data, &goldens); err != nil {
		t.Fatal(err)
	}
	if len(goldens) < 20 {
		t.Fatalf("only %d chat goldens", len(goldens))
	}
	models := map[plan.Kind]*Model{}
	for _, kind := range []plan.Kind{plan.KindSGLang, plan.KindVLLM} {
		m, err := Open(plan.Tokenizer{Path: qwenPath, Config: "../../../testdata/tokenizers/qwen3/tokenizer_config.json", EngineKind: kind})
		if err != nil {
			t.Fatal(err)
		}
		models[kind] = m
	}
	for _, g := range goldens {
		t.Run(g.Name, func(t *testing.T) {
			c := token.Chat{Messages: json.RawMessage(g.Messages), NoGenerationPrompt: !g.AddGenerationPrompt}
			if g.Tools != nil {
				c.Tools = json.RawMessage(*g.Tools)
			}
			if g.Kwargs != nil {
				c.Kwargs = json.RawMessage(*g.Kwargs)
			}
			if g.Request != nil {
				var r struct {
					ReasoningEffort      json.RawMessage `json:"reasoning_effort"`
					ContinueFinalMessage bool            `json:"continue_final_message"`
				}
				if err := json.Unmarshal([]byte(*g.Request), &r); err != nil {
					t.Fatal(err)
				}
				c.ReasoningEffort, c.ContinueFinalMessage = r.ReasoningEffort, r.ContinueFinalMessage
			}
			ids, err := models[plan.Kind(g.Engine)].EncodeChat(nil, c)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, g.IDs) {
				t.Errorf("ids differ from the reference\n got %v\nwant %v", ids, g.IDs)
			}
		})
	}
}
