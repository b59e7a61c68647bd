package chattemplate

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"unsafe"

	"github.com/ardanlabs/jinja"

	"github.com/routerkit/router/runtime/arena"
	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// The Jinja engine builds a render's output in a strings.Builder, which grows by a
// quarter at a time past its first kilobytes, and every `+` of a template copies its
// operands: Qwen3's template copies a 128k-token conversation's text about eight times,
// a millisecond of CPU and 4 MB of garbage per request. For templates it knows by their
// exact source, the package renders common conversations natively instead, into one
// buffer of the output's size, and leaves everything else to the Jinja engine: a native
// renderer takes only the variables it reproduces exactly and reports whether it did.
// TestNativeMatchesJinja and FuzzNativeQwen3 compare both renders; setting
// ROUTER_CHAT_TEMPLATE_ENGINE=jinja in the environment renders everything with Jinja.

// nativeRenderer renders a template natively, into memory cut from a (nil: allocated),
// from the template's variables or, before any of them is built, from the request's
// parsed JSON; ok false leaves the render to the Jinja engine (or, for tree, to vars).
type nativeRenderer struct {
	vars func(vars map[string]jinja.Value, a *arena.Bytes) (out string, ok bool)
	// tree renders from c.Parsed when the request is one whose variables vars would take
	// anyway, without building them: building Jinja values of every message, then the
	// engine's copies of them, cost a short Qwen3 chat a third of its preparation.
	tree func(c token.Chat, o Options) (out string, ok bool)
}

// nativeRenderers maps the SHA-256 of a template's source to its native renderer.
var nativeRenderers = map[string]*nativeRenderer{
	qwen3Template: {vars: renderQwen3, tree: renderQwen3Tree},
}

// qwen3Template is the SHA-256 of the chat template of Qwen3's tokenizer_config.json
// (testdata/tokenizers/qwen3), which the Qwen3 dense and MoE models share.
const qwen3Template = "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"

// jinjaOnly turns the native renderers off (ROUTER_CHAT_TEMPLATE_ENGINE=jinja).
var jinjaOnly = os.Getenv("ROUTER_CHAT_TEMPLATE_ENGINE") == "jinja"

// nativeFor returns the native renderer of a template's source, nil when there is none.
func nativeFor(src string) *nativeRenderer {
	if jinjaOnly {
		return nil
	}
	sum := sha256.Sum256([]byte(src))
	return nativeRenderers[hex.EncodeToString(sum[:])]
}

// qwen3Vars are the variables renderQwen3 takes: those it reproduces and those the
// template does not read.
var qwen3Vars = map[string]bool{
	"messages": true, "add_generation_prompt": true, "enable_thinking": true,
	"documents": true, "raise_exception": true, "bos_token": true, "eos_token": true,
	"reasoning_effort": true, "thinking": true,
}

// qwenMessage is a message as Qwen3's template reads it.
type qwenMessage struct {
	role, content string
}

// qwenChat is a conversation as Qwen3's template reads it.
type qwenChat struct {
	msgs        []qwenMessage
	agp         bool // add_generation_prompt
	thinkingOff bool // enable_thinking false
}

// renderQwen3 renders Qwen3's template for conversations without tools whose messages
// are system, user and assistant messages with string content and no reasoning_content
// or tool_calls (other keys the template does not read), with enable_thinking absent or
// a boolean and no other template argument.
func renderQwen3(vars map[string]jinja.Value, a *arena.Bytes) (string, bool) {
	for k := range vars {
		if !qwen3Vars[k] {
			return "", false // tools, or a chat_template_kwargs key that may shadow a name the template uses (namespace)
		}
	}
	var c qwenChat
	if v, ok := vars["enable_thinking"]; ok {
		if !v.IsBool() {
			return "", false
		}
		c.thinkingOff = !v.AsBool()
	}
	agp, ok := vars["add_generation_prompt"]
	if !ok || !agp.IsBool() {
		return "", false
	}
	c.agp = agp.AsBool()
	raw, ok := vars["messages"]
	if !ok || !raw.IsList() || len(raw.AsList().Items) == 0 {
		return "", false
	}
	c.msgs = make([]qwenMessage, len(raw.AsList().Items))
	for i, v := range raw.AsList().Items {
		if !v.IsDict() {
			return "", false
		}
		d := v.AsDict()
		role, _ := d.Get("role")
		content, _ := d.Get("content")
		if !role.IsString() || !content.IsString() {
			return "", false
		}
		for _, k := range []string{"reasoning_content", "tool_calls"} {
			if v, ok := d.Get(k); ok && !v.IsNone() {
				return "", false
			}
		}
		if !qwenRole(role.AsString()) {
			return "", false
		}
		c.msgs[i] = qwenMessage{role.AsString(), content.AsString()}
	}
	return c.render(a), true
}

// renderQwen3Tree is renderQwen3 from the request's parsed JSON, for the requests whose
// variables both engines build without changing a message: every message an object of a
// string role (system, user or assistant, in lower case, which SGLang would otherwise
// lower) and a string content (SGLang turns null into "", and both flatten parts), with
// none of the keys an engine rewrites or the template reads besides those (tool_calls,
// reasoning_content, reasoning), and for SGLang no final assistant message (which it
// turns into a user turn); no tools, no reasoning_effort, and chat_template_kwargs absent
// or holding only a boolean enable_thinking. Anything else goes the way of the
// variables, which handles it or refuses it with the error it owes.
func renderQwen3Tree(c token.Chat, o Options) (string, bool) {
	p := c.Parsed
	if p.Messages == nil || p.Messages.Kind != strictjson.Array || len(p.Messages.Elems) == 0 ||
		!absent(p.Tools) || !absentRaw(c.ReasoningEffort) {
		return "", false
	}
	qc := qwenChat{agp: o.AddGenerationPrompt || o.Engine == SGLang}
	if !absent(p.Kwargs) {
		if p.Kwargs.Kind != strictjson.Object || len(p.Kwargs.Keys) != 1 || p.Kwargs.Keys[0] != "enable_thinking" || p.Kwargs.Elems[0].Kind != strictjson.Bool {
			return "", false
		}
		qc.thinkingOff = !p.Kwargs.Elems[0].Bool
	}
	qc.msgs = make([]qwenMessage, len(p.Messages.Elems))
	for i := range p.Messages.Elems {
		m := &p.Messages.Elems[i]
		if m.Kind != strictjson.Object {
			return "", false
		}
		role, content := m.Get("role"), m.Get("content")
		if role == nil || role.Kind != strictjson.String || !qwenRole(role.Str) || content == nil || content.Kind != strictjson.String ||
			m.Get("tool_calls") != nil || m.Get("reasoning_content") != nil || m.Get("reasoning") != nil {
			return "", false
		}
		qc.msgs[i] = qwenMessage{role.Str, content.Str}
	}
	if o.Engine == SGLang && qc.msgs[len(qc.msgs)-1].role == "assistant" {
		return "", false
	}
	return qc.render(c.Arena), true
}

// qwenRole reports whether role is one renderQwen3 renders.
func qwenRole(role string) bool {
	return role == "system" || role == "user" || role == "assistant"
}

// absent reports whether a parsed field is absent or null.
func absent(v *strictjson.Value) bool { return v == nil || v.Kind == strictjson.Null }

// render renders c as Qwen3's template does, step for step: the system message first,
// the last user query that is not a tool response, an assistant message's reasoning split
// at </think> and printed only after that query, the generation prompt.
func (c qwenChat) render(a *arena.Bytes) string {
	msgs := c.msgs
	size := 64
	for _, m := range msgs {
		size += len(m.content) + 64
	}
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].content
		if msgs[i].role == "user" && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	b := a.Alloc(size)
	if msgs[0].role == "system" {
		b = append(b, "<|im_start|>system\n"...)
		b = append(b, msgs[0].content...) // not concatenated: a long system prompt would be copied twice
		b = append(b, "<|im_end|>\n"...)
	}
	for i, m := range msgs {
		switch {
		case m.role == "user" || (m.role == "system" && i > 0):
			b = append(b, "<|im_start|>"...)
			b = append(b, m.role...)
			b = append(b, "\n"...)
			b = append(b, m.content...)
			b = append(b, "<|im_end|>\n"...)
		case m.role == "assistant":
			content, reasoning := m.content, ""
			if strings.Contains(m.content, "</think>") {
				content = strings.TrimLeft(m.content[strings.LastIndex(m.content, "</think>")+len("</think>"):], "\n")
				before := strings.TrimRight(m.content[:strings.Index(m.content, "</think>")], "\n")
				if j := strings.LastIndex(before, "<think>"); j >= 0 {
					before = before[j+len("<think>"):]
				}
				reasoning = strings.TrimLeft(before, "\n")
			}
			b = append(b, "<|im_start|>assistant\n"...)
			if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
				b = append(b, "<think>\n"...)
				b = append(b, strings.Trim(reasoning, "\n")...)
				b = append(b, "\n</think>\n\n"...)
				content = strings.TrimLeft(content, "\n")
			}
			b = append(b, content...)
			b = append(b, "<|im_end|>\n"...)
		}
	}
	if c.agp {
		b = append(b, "<|im_start|>assistant\n"...)
		if c.thinkingOff {
			b = append(b, "<think>\n\n</think>\n\n"...)
		}
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
