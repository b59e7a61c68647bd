package chattemplate

import (
	"encoding/json"
	"testing"

	"github.com/routerkit/router/runtime/arena"
	"github.com/routerkit/router/runtime/token"
)

// jinjaOf returns t without its native renderer: the Jinja engine's render.
func jinjaOf(t *Template) *Template {
	j := *t
	j.native = nil
	return &j
}

// compareNative renders c with tpl's native renderer, from the raw JSON and from the
// parsed tree, and with the Jinja engine, for both engines, and fails when the outputs or
// the errors differ. It returns whether the native renderer took vLLM's variables.
func compareNative(t testing.TB, tpl *Template, c token.Chat, agp bool) bool {
	t.Helper()
	for _, e := range []Engine{VLLM, SGLang} {
		o := Options{AddGenerationPrompt: agp, Engine: e}
		want, wantErr := jinjaOf(tpl).Render(c, o)
		for _, in := range []token.Chat{c, parsed(t, c)} {
			for _, a := range []*arena.Bytes{nil, new(arena.Bytes)} { // the render allocated, and cut from an arena
				in.Arena = a
				got, gotErr := tpl.Render(in, o)
				if got != want || (gotErr == nil) != (wantErr == nil) {
					t.Fatalf("%s, %s (parsed: %t): native render %q (%v), Jinja %q (%v)", e, c.Messages, in.Parsed != nil, got, gotErr, want, wantErr)
				}
				a.Release()
			}
		}
	}
	vars, err := tpl.vars(c, Options{AddGenerationPrompt: agp})
	if err != nil {
		return false
	}
	_, ok := tpl.native.vars(vars, nil)
	return ok
}

// TestNativeTreeTakes checks which parsed requests Qwen3's renderer takes straight from
// the tree, without building the template's variables: plain conversations, with
// enable_thinking or without, for both engines (SGLang's final assistant message aside),
// and none of those whose variables an engine rewrites or which bring tools, other
// template arguments or reasoning_effort. compareNative checks that what it renders is
// Jinja's.
func TestNativeTreeTakes(t *testing.T) {
	tpl := qwen3Model(t).chat
	takes := func(c token.Chat, e Engine) bool {
		_, ok := tpl.native.tree(parsed(t, c), Options{AddGenerationPrompt: true, Engine: e})
		return ok
	}
	for _, msgs := range []string{
		userHi,
		`[{"role": "system", "content": "S"}, {"role": "user", "content": "Q", "name": "u"}, {"role": "assistant", "content": "<think>R</think>A"}, {"role": "user", "content": "Q2"}]`,
	} {
		for _, kwargs := range []string{"", "null", `{"enable_thinking": false}`} {
			for _, e := range []Engine{VLLM, SGLang} {
				if !takes(chat(msgs, "", kwargs), e) {
					t.Errorf("%s, %s (kwargs %q): not taken from the tree", e, msgs, kwargs)
				}
			}
		}
	}
	finalAssistant := chat(`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]`, "", "")
	if !takes(finalAssistant, VLLM) || takes(finalAssistant, SGLang) {
		t.Error("a final assistant message: want taken for vLLM only (SGLang turns it into a user turn)")
	}
	effort := chat(userHi, "", "")
	effort.ReasoningEffort = []byte(`"low"`)
	declined := map[string]token.Chat{
		"tools":                    chat(userHi, `[{"type": "function", "function": {"name": "f", "parameters": {}}}]`, ""),
		"empty tools":              chat(userHi, `[]`, ""),
		"reasoning_effort":         effort,
		"enable_thinking a string": chat(userHi, "", `{"enable_thinking": "no"}`),
		"another kwarg":            chat(userHi, "", `{"enable_thinking": true, "custom": 1}`),
		"upper-case role":          chat(`[{"role": "User", "content": "Q"}]`, "", ""),
		"tool role":                chat(`[{"role": "user", "content": "Q"}, {"role": "tool", "content": "r"}]`, "", ""),
		"null content":             chat(`[{"role": "user", "content": null}]`, "", ""),
		"no content":               chat(`[{"role": "user"}]`, "", ""),
		"content parts":            chat(`[{"role": "user", "content": [{"type": "text", "text": "Q"}]}]`, "", ""),
		"tool_calls":               chat(`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "", "tool_calls": null}, {"role": "user", "content": "Q"}]`, "", ""),
		"reasoning":                chat(`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning": "R"}, {"role": "user", "content": "Q"}]`, "", ""),
		"reasoning_content":        chat(`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning_content": "R"}, {"role": "user", "content": "Q"}]`, "", ""),
		"no messages":              chat(`[]`, "", ""),
		"a message not an object":  chat(`["Q"]`, "", ""),
	}
	for name, c := range declined {
		for _, e := range []Engine{VLLM, SGLang} {
			if takes(c, e) {
				t.Errorf("%s, %s: taken from the tree", name, e)
			}
		}
		compareNative(t, tpl, c, true)
	}
	// An engine that hands this template content as parts rebuilds every string content,
	// so Render leaves such a request to the variables.
	parts := *tpl
	parts.openaiVLLM = true
	o := Options{AddGenerationPrompt: true, Engine: VLLM}
	want, wantErr := jinjaOf(&parts).Render(chat(userHi, "", ""), o)
	if got, err := parts.Render(parsed(t, chat(userHi, "", "")), o); got != want || (err == nil) != (wantErr == nil) {
		t.Errorf("content as parts: rendered %q (%v) from the tree, Jinja %q (%v)", got, err, want, wantErr)
	}
}

// TestNativeMatchesJinja renders conversations with Qwen3's template natively and with
// the Jinja engine: the reasoning split at </think> and its edges, tool responses as the
// last query, a system message later on, the generation prompt and enable_thinking.
// Conversations the native renderer must leave to Jinja (tools, tool calls, tool
// messages, reasoning_content, other roles) are compared too.
func TestNativeMatchesJinja(t *testing.T) {
	tpl := qwen3Model(t).chat
	if tpl.native == nil {
		t.Fatal("Qwen3's template has no native renderer: did its source or qwen3Template change?")
	}
	native := []string{
		userHi,
		`[{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]`,
		`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\nR\n</think>\n\nA"}, {"role": "user", "content": "Q2"}]`,
		`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\nR\n</think>\n\nA"}]`,
		`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "x</think>y</think>\n\nz"}]`,
		`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "a<think>b<think>\n\nc\n\n</think>d"}]`,
		`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "</think>"}, {"role": "assistant", "content": "\n\nplain"}]`,
		`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}, {"role": "user", "content": "<tool_response>r</tool_response>"}, {"role": "assistant", "content": "<think>t</think>B"}]`,
		`[{"role": "user", "content": "<tool_response>only</tool_response>"}, {"role": "assistant", "content": "\nA"}]`,
		`[{"role": "assistant", "content": "first"}, {"role": "system", "content": "later"}, {"role": "user", "content": "Q", "name": "u"}]`,
		`[{"role": "system", "content": ""}, {"role": "user", "content": ""}, {"role": "assistant", "content": ""}]`,
	}
	for _, msgs := range native {
		for _, kwargs := range []string{"", `{"enable_thinking": false}`, `{"enable_thinking": true}`} {
			for _, agp := range []bool{true, false} {
				if !compareNative(t, tpl, chat(msgs, "", kwargs), agp) {
					t.Fatalf("%s (%s): the native renderer did not take it", msgs, kwargs)
				}
			}
		}
	}
	jinjaOnly := []struct{ msgs, tools, kwargs string }{
		{userHi, `[{"type": "function", "function": {"name": "f", "parameters": {}}}]`, ""},
		{userHi, "", `{"enable_thinking": "no"}`},
		{userHi, "", `{"namespace": 1}`},
		{userHi, "", `{"custom": "x"}`},
		{`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A", "reasoning": "R", "reasoning_content": "R"}]`, "", ""},
		{`[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "content": "r"}]`, "", ""},
		{`[{"role": "developer", "content": "D"}, {"role": "user", "content": "Q"}]`, "", ""},
	}
	for _, c := range jinjaOnly {
		if compareNative(t, tpl, chat(c.msgs, c.tools, c.kwargs), true) {
			t.Fatalf("%s: the native renderer took what it does not reproduce", c.msgs)
		}
	}
}

// FuzzNativeQwen3 renders conversations of fuzzed roles and contents (with reasoning and
// tool-response tags in them) with Qwen3's template natively and with the Jinja engine.
func FuzzNativeQwen3(f *testing.F) {
	tpl := qwen3Model(f).chat
	f.Add([]byte{0, 1, 2, 1, 2}, "<think>\nR\n</think>\n\nA", "Q", true, uint8(0))
	f.Add([]byte{1, 3, 2}, "\n</think>\n", "<think>", false, uint8(1))
	f.Add([]byte{2, 0, 1}, "x</think>y<think>z", "", true, uint8(2))
	f.Fuzz(func(t *testing.T, roles []byte, a, b string, agp bool, thinking uint8) {
		type msg struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		var msgs []msg
		for i, r := range roles[:min(len(roles), 8)] {
			content := a
			if i%2 == 1 {
				content = b
			}
			switch r % 4 {
			case 0:
				msgs = append(msgs, msg{"system", content})
			case 1:
				msgs = append(msgs, msg{"user", content})
			case 2:
				msgs = append(msgs, msg{"assistant", content})
			case 3:
				msgs = append(msgs, msg{"user", "<tool_response>" + content + "</tool_response>"})
			}
		}
		raw, _ := json.Marshal(msgs)
		kwargs := [...]string{"", `{"enable_thinking": false}`, `{"enable_thinking": true}`}[thinking%3]
		compareNative(t, tpl, chat(string(raw), "", kwargs), agp)
	})
}

// TestJinjaOnlySwitch checks the switch back: with ROUTER_CHAT_TEMPLATE_ENGINE=jinja no
// template gets a native renderer.
func TestJinjaOnlySwitch(t *testing.T) {
	src := qwen3Model(t).chat.src
	if nativeFor(src) == nil {
		t.Fatal("Qwen3's template has no native renderer")
	}
	defer func(old bool) { jinjaOnly = old }(jinjaOnly)
	jinjaOnly = true
	if nativeFor(src) != nil {
		t.Fatal("ROUTER_CHAT_TEMPLATE_ENGINE=jinja left a native renderer")
	}
}
