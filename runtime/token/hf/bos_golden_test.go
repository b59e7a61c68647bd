package hf

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// TestDeepSeekV3BOS: a DeepSeek-V3 text prompt encoded with special tokens starts with
// BOS, as Python transformers encodes it for vLLM and SGLang: the config names
// LlamaTokenizerFast with add_bos_token, whose __init__ replaces tokenizer.json's
// post-processor (ByteLevel only, no BOS) with one that adds it
// (LlamaTokenizerFast.update_post_processor, huggingface/transformers
// src/transformers/models/llama/tokenization_llama_fast.py). The ids are transformers.js's
// (testdata/gen_bos_goldens.mjs); without special tokens nothing is added.
func TestDeepSeekV3BOS(t *testing.T) {
	data, err := os.ReadFile("testdata/bos_goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var goldens []struct {
		Text    string   `json:"text"`
		Plain   []uint32 `json:"plain"`
		Special []uint32 `json:"special"`
	}
	if err := json.Unmarshal(data, &goldens); err != nil {
		t.Fatal(err)
	}
	const dir = "../../../testdata/tokenizers/deepseek_v3/"
	m, err := Open(plan.Tokenizer{Path: dir + "tokenizer.json.gz", Config: dir + "tokenizer_config.json", EngineKind: plan.KindSGLang})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		for _, c := range []struct {
			special bool
			want    []uint32
		}{{true, g.Special}, {false, g.Plain}} {
			got, err := m.Encode(nil, g.Text, c.special)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%q with special tokens %v:\n got %v\nwant %v", g.Text, c.special, got, c.want)
			}
		}
	}
}
