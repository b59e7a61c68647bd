package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/routerkit/router/runtime/token"
)

// ErrUnfaithful marks a template construct that ardanlabs/jinja v1.8.0 renders differently
// from Python Jinja2, so prompts would not match the engine's token for token.
var ErrUnfaithful = errors.New("renders differently from the engine")

// unfaithful lists constructs known to render differently, with the reason.
var unfaithful = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`tojson\s*\(\s*indent`), "tojson(indent=…) is encoded with sorted keys and HTML escaping, where json.dumps keeps key order"},
}

// checkConversations are the small conversations Check renders: what every chat model is
// sent, with and without tools.
var checkConversations = []token.Chat{
	{Messages: json.RawMessage(`[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hi"}]`)},
	{Messages: json.RawMessage(`[{"role":"user","content":"Hi"}]`)},
	{
		Messages: json.RawMessage(`[{"role":"system","content":"You are helpful."},{"role":"user","content":"Weather in Paris?"}]`),
		Tools:    json.RawMessage(`[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`),
	},
	{
		Messages: json.RawMessage(`[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`),
		Tools:    json.RawMessage(`[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`),
	},
}

// Check renders small representative conversations (system and user, user only, a tool
// definition, a tool call and its result) for both engines, so that a filter, test or
// method the Jinja engine lacks fails when the model is configured rather than on its
// first request. A template that refuses a conversation with raise_exception passes: that
// is the template working. Constructs known to render differently from Python Jinja2 are
// reported with ErrUnfaithful, which a caller may choose to accept.
func (t *Template) Check() error {
	for _, e := range []Engine{VLLM, SGLang} {
		for i, c := range checkConversations {
			_, err := t.Render(c, Options{AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>", Engine: e})
			if _, ok := errors.AsType[*RaiseError](err); err != nil && !ok {
				return fmt.Errorf("check conversation %d for %v: %w", i+1, e, err)
			}
		}
	}
	for _, u := range unfaithful {
		if loc := u.re.FindStringIndex(t.src); loc != nil {
			return fmt.Errorf("line %d: %s: %w", lineOf(t.src, loc[0]), u.why, ErrUnfaithful)
		}
	}
	return nil
}

// lineOf returns the 1-based line of byte offset off in src.
func lineOf(src string, off int) int {
	line := 1
	for _, c := range src[:off] {
		if c == '\n' {
			line++
		}
	}
	return line
}
