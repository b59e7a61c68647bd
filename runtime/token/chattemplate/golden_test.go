package chattemplate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// golden is one case of testdata/goldens.json, written by testdata/gen_goldens.py with
// Python Jinja2 set up as HF transformers and the engines' request handling.
type golden struct {
	Name                string `json:"name"`
	Config              string `json:"config"`
	Source              string `json:"source"`
	BOSToken            string `json:"bos_token"`
	EOSToken            string `json:"eos_token"`
	Engine              string `json:"engine"`
	AddGenerationPrompt bool   `json:"add_generation_prompt"`
	Messages            string `json:"messages"`
	Tools               string `json:"tools"`
	Kwargs              string `json:"kwargs"`
	Request             string `json:"request"`
	Want                string `json:"want"`
	Error               string `json:"error"`
}

// repoRoot is where the goldens' config paths start.
const repoRoot = "../../.."

func loadGoldens(t testing.TB) []golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var gs []golden
	if err := json.Unmarshal(data, &gs); err != nil {
		t.Fatal(err)
	}
	if len(gs) == 0 {
		t.Fatal("no goldens")
	}
	return gs
}

// renderer returns the golden's renderer: a Model for a tokenizer config, a Template for
// an inline source.
func (g golden) renderer(t testing.TB) func(token.Chat, Options) (string, error) {
	t.Helper()
	if g.Config != "" {
		cfg, err := LoadConfig(filepath.Join(repoRoot, g.Config))
		if err != nil {
			t.Fatal(err)
		}
		m, err := cfg.Compile()
		if err != nil {
			t.Fatal(err)
		}
		return m.Render
	}
	tpl, err := Parse(g.Source)
	if err != nil {
		t.Fatal(err)
	}
	return tpl.Render
}

func (g golden) options(t testing.TB) Options {
	t.Helper()
	o := Options{AddGenerationPrompt: g.AddGenerationPrompt, BOSToken: g.BOSToken, EOSToken: g.EOSToken}
	switch g.Engine {
	case "vllm":
		o.Engine = VLLM
	case "sglang":
		o.Engine = SGLang
	default:
		t.Fatalf("unknown engine %q", g.Engine)
	}
	return o
}

func (g golden) chat() token.Chat {
	c := token.Chat{Messages: json.RawMessage(g.Messages)}
	if g.Tools != "" {
		c.Tools = json.RawMessage(g.Tools)
	}
	if g.Kwargs != "" {
		c.Kwargs = json.RawMessage(g.Kwargs)
	}
	if g.Request != "" {
		var r struct {
			ReasoningEffort      json.RawMessage `json:"reasoning_effort"`
			ContinueFinalMessage bool            `json:"continue_final_message"`
		}
		_ = json.Unmarshal([]byte(g.Request), &r)
		c.ReasoningEffort, c.ContinueFinalMessage = r.ReasoningEffort, r.ContinueFinalMessage
	}
	return c
}

// parsed is c with its JSON fields parsed by strictjson.Parse, as the router hands a chat
// over.
func parsed(t testing.TB, c token.Chat) token.Chat {
	t.Helper()
	field := func(raw json.RawMessage) *strictjson.Value {
		if len(raw) == 0 {
			return nil
		}
		v, err := strictjson.Parse(raw, (*any)(nil))
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	c.Parsed = &token.ParsedChat{Messages: field(c.Messages), Tools: field(c.Tools), Kwargs: field(c.Kwargs)}
	return c
}

// TestGoldens renders every case, from the raw JSON and from the parsed tree, and
// compares it byte for byte with Python's prompt.
func TestGoldens(t *testing.T) {
	for _, g := range loadGoldens(t) {
		t.Run(g.Name, func(t *testing.T) {
			render := g.renderer(t)
			for _, c := range []token.Chat{g.chat(), parsed(t, g.chat())} {
				got, err := render(c, g.options(t))
				g.check(t, got, err)
			}
		})
	}
}

func (g golden) check(t *testing.T, got string, err error) {
	t.Helper()
	if g.Error != "" {
		var raised *RaiseError
		if !errors.As(err, &raised) || raised.Message != g.Error {
			t.Fatalf("got error %v, want raise_exception %q", err, g.Error)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got != g.Want {
		t.Errorf("prompt differs from Python's\n got: %q\nwant: %q", got, g.Want)
	}
}
