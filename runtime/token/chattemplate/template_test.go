package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/routerkit/router/runtime/token"
)

func mustParse(t testing.TB, src string) *Template {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func chat(messages, tools, kwargs string) token.Chat {
	c := token.Chat{Messages: json.RawMessage(messages)}
	if tools != "" {
		c.Tools = json.RawMessage(tools)
	}
	if kwargs != "" {
		c.Kwargs = json.RawMessage(kwargs)
	}
	return c
}

const userHi = `[{"role": "user", "content": "Hi"}]`

func TestParseErrorNamesLine(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"{{ bos_token }}\n{% for m in messages %}\n{% frobnicate %}\n{% endfor %}", `line 3: unknown statement "frobnicate"`},
		{"{{ bos_token }}\n\n{% for m messages %}{% endfor %}", "line 3: for loop missing 'in'"},
	} {
		_, err := Parse(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want an error with %q", err, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // "" for no error
	}{
		{"plain", `{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}`, ""},
		{"refusing with raise_exception passes", `{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok`, ""},
		{"unknown filter", `{{ messages | no_such_filter }}`, `unknown filter "no_such_filter"`},
		{"tojson with indent", "{% for t in tools %}\n{{ t | tojson(indent=4) }}{% endfor %}", "line 2: tojson(indent=…)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mustParse(t, tt.src).Check()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
	if err := mustParse(t, `{{ tools | tojson(indent=2) }}`).Check(); !errors.Is(err, ErrUnfaithful) {
		t.Errorf("got %v, want ErrUnfaithful", err)
	}
}

func TestCheckFixtures(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3"} {
		cfg, err := LoadConfig(filepath.Join(repoRoot, "testdata/tokenizers", name, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := cfg.Compile()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestToolKeyOrder renders tools with keys out of alphabetical order at every level: the
// request's order must reach tojson, as json.loads and json.dumps keep it.
func TestToolKeyOrder(t *testing.T) {
	tools := `[{"function": {"parameters": {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"minimum": 1, "type": "integer"}}}, "name": "f", "x_extra": true}, "type": "function"}]`
	tpl := mustParse(t, `{% for t in tools %}{{ t | tojson }}{% endfor %}`)
	tests := []struct {
		engine Engine
		want   string
	}{
		{VLLM, `{"type": "function", "function": {"name": "f", "description": null, "parameters": {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"minimum": 1, "type": "integer"}}}, "x_extra": true}}`},
		{SGLang, `{"description": null, "name": "f", "parameters": {"type": "object", "properties": {"zeta": {"type": "string"}, "alpha": {"minimum": 1, "type": "integer"}}}, "strict": false}`},
	}
	for _, tt := range tests {
		got, err := tpl.Render(chat(userHi, tools, ""), Options{Engine: tt.engine})
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%v:\n got %s\nwant %s", tt.engine, got, tt.want)
		}
	}
}

func TestRaiseException(t *testing.T) {
	tpl := mustParse(t, `{{ raise_exception('Only user and assistant roles are supported!') }}`)
	_, err := tpl.Render(chat(userHi, "", ""), Options{})
	var raised *RaiseError
	if !errors.As(err, &raised) || raised.Message != "Only user and assistant roles are supported!" {
		t.Fatalf("got %v, want the template's message as a *RaiseError", err)
	}
}

func TestVariables(t *testing.T) {
	tpl := mustParse(t, `{{ bos_token is defined }} {{ eos_token }} {{ tools is defined }} {{ documents is none }} {{ add_generation_prompt }} {{ enable_thinking }} {{ messages | length }} {{ reasoning_effort is defined }}`)
	tests := []struct {
		name string
		c    token.Chat
		o    Options
		want string
	}{
		{"tokens and kwargs", chat(userHi, "null", `{"enable_thinking": false, "messages": [], "add_generation_prompt": true}`), Options{EOSToken: "</s>"}, "False </s> False True False False 1 False"},
		// SGLang asks for the generation prompt whatever the options say, and passes
		// reasoning_effort only when the request has one (serving_chat.py at 002897c2).
		{"tools given, sglang", chat(userHi, `[{"type": "function", "function": {"name": "f"}}]`, ""), Options{BOSToken: "<s>", Engine: SGLang}, "True  True True True  1 False"},
		{"sglang reasoning_effort none", token.Chat{Messages: json.RawMessage(userHi), ReasoningEffort: json.RawMessage(`"none"`)}, Options{Engine: SGLang}, "False  False True True False 1 True"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tpl.Render(tt.c, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMultimodalParts(t *testing.T) {
	msgs := `[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "text", "text": "What is this?"}]}]`
	tpl := mustParse(t, `{% for m in messages %}{{ m.content }}{% endfor %}`)
	if _, err := tpl.Render(chat(msgs, "", ""), Options{Engine: VLLM}); !errors.Is(err, ErrMultimodal) {
		t.Errorf("vllm: got %v, want ErrMultimodal", err)
	}
	got, err := tpl.Render(chat(msgs, "", ""), Options{Engine: SGLang})
	if err != nil || got != "What is this?" {
		t.Errorf("sglang: got %q, %v; want the text alone", got, err)
	}
}

func TestRenderErrors(t *testing.T) {
	tpl := mustParse(t, `{{ messages | length }}`)
	tests := []struct {
		name string
		c    token.Chat
		want string
	}{
		{"messages not JSON", chat(`[{`, "", ""), "decode messages"},
		{"messages not an array", chat(`{}`, "", ""), "messages must be an array"},
		{"tool without function", chat(userHi, `[{"type": "function"}]`, ""), "tools[0].function must be an object"},
		{"arguments not JSON", chat(`[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{nope"}}]}]`, "", ""), "messages[0]: tool_calls[0]: arguments are not JSON"},
		{"kwargs not an object", chat(userHi, "", `[1]`), "chat_template_kwargs must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tpl.Render(tt.c, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestModelTemplateChoice follows transformers: the "tool_use" template when tools are
// passed (vLLM passes an empty list, SGLang None), else "default".
func TestModelTemplateChoice(t *testing.T) {
	path := writeConfig(t, `{"chat_template": [{"name": "default", "template": "default {{ bos_token }}"}, {"name": "tool_use", "template": "tool_use {{ bos_token }}"}], "bos_token": "<s>"}`)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cfg.Compile()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tools  string
		engine Engine
		want   string
	}{
		{"", VLLM, "default <s>"},
		{"null", VLLM, "default <s>"},
		{"[]", VLLM, "tool_use <s>"},
		{"[]", SGLang, "default <s>"},
		{`[{"type": "function", "function": {"name": "f"}}]`, SGLang, "tool_use <s>"},
	}
	for _, tt := range tests {
		got, err := m.Render(chat(userHi, tt.tools, ""), Options{Engine: tt.engine})
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("tools %q on %v: got %q, want %q", tt.tools, tt.engine, got, tt.want)
		}
	}
}

// TestConcurrentRender renders from many goroutines with one Template; run with -race.
func TestConcurrentRender(t *testing.T) {
	tpl := mustParse(t, `{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}{{ tools | tojson }}`)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			msgs := fmt.Sprintf(`[{"role": "user", "content": "m%d"}]`, i)
			want := fmt.Sprintf(`user=m%d;[{"description": null, "name": "f%d", "parameters": null, "strict": false}]`, i, i)
			for range 50 {
				got, err := tpl.Render(chat(msgs, fmt.Sprintf(`[{"function": {"name": "f%d"}}]`, i), ""), Options{Engine: SGLang})
				if err != nil || got != want {
					errs <- fmt.Errorf("goroutine %d: got %q, %v", i, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestContentFormat checks the detection of templates that loop over content parts: vLLM
// follows any variable bound to a message, SGLang only message, msg and m.
func TestContentFormat(t *testing.T) {
	tests := []struct {
		src               string
		wantVLLM, wantSGL bool
	}{
		{`{% for message in messages %}{{ message.content }}{% endfor %}`, false, false},
		{`{% for message in messages %}{% for c in message['content'] %}{{ c.text }}{% endfor %}{% endfor %}`, true, true},
		{`{% for m in messages %}{%- for c in m.content | selectattr("type", "eq", "text") %}{{ c.text }}{% endfor %}{% endfor %}`, true, true},
		{`{% for item in messages %}{% for c in item.content %}{{ c.text }}{% endfor %}{% endfor %}`, true, false},
	}
	for _, tt := range tests {
		tpl := mustParse(t, tt.src)
		if tpl.openai(VLLM) != tt.wantVLLM || tpl.openai(SGLang) != tt.wantSGL {
			t.Errorf("%s: got vllm %v sglang %v, want %v %v", tt.src, tpl.openai(VLLM), tpl.openai(SGLang), tt.wantVLLM, tt.wantSGL)
		}
	}
}
