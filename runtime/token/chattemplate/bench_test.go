package chattemplate

import (
	"path/filepath"
	"testing"
)

// qwen3Model compiles the Qwen3 fixture's templates.
func qwen3Model(b testing.TB) *Model {
	b.Helper()
	cfg, err := LoadConfig(filepath.Join(repoRoot, "testdata/tokenizers/qwen3/tokenizer_config.json"))
	if err != nil {
		b.Fatal(err)
	}
	m, err := cfg.Compile()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkRender renders with the Qwen3 template a typical four-message conversation and
// a conversation with two tools, a tool call and its result.
func BenchmarkRender(b *testing.B) {
	m := qwen3Model(b)
	cases := []struct {
		name string
		msgs string
		tool string
	}{
		{"chat4", `[{"role": "system", "content": "You are a helpful assistant. Answer concisely and cite sources when you can."}, {"role": "user", "content": "What is the capital of France, and what is it famous for?"}, {"role": "assistant", "content": "<think>\nEasy.\n</think>\n\nParis, famous for the Eiffel Tower, the Louvre and its cafés."}, {"role": "user", "content": "And how many people live there?"}]`, ""},
		{"tools", `[{"role": "system", "content": "You can call tools."}, {"role": "user", "content": "Weather in Paris tomorrow at 9?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"when\": {\"day\": 1, \"hour\": 9}}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}]`, `[{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"enum": ["celsius", "fahrenheit"], "type": "string"}, "when": {"type": "object", "properties": {"day": {"type": "integer"}, "hour": {"type": "integer"}}}}}}}, {"type": "function", "function": {"name": "search", "description": "Search the web.", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}}, "required": ["query"]}}}]`},
	}
	for _, c := range cases {
		for _, e := range []Engine{VLLM, SGLang} {
			b.Run(c.name+"/"+e.String(), func(b *testing.B) {
				req := chat(c.msgs, c.tool, "")
				o := Options{AddGenerationPrompt: true, Engine: e}
				for b.Loop() {
					if _, err := m.Render(req, o); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
