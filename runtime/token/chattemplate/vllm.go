package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ardanlabs/jinja"
)

// vllmMessage rebuilds one message as vLLM's parse_chat_messages does
// (vllm/entrypoints/chat_utils.py, _parse_chat_message_content and _postprocess_messages,
// moved to vllm/renderers/chat_utils/parse_chat_message_content.py): a new object with
// role and flattened content, then, by role, tool_calls, reasoning and reasoning_content,
// tool_call_id, name, task and tools. Other keys of the request are dropped. A tool
// message's text parts are joined into a string even for "openai" templates.
func vllmMessage(m *jinja.Dict, openai bool) (jinja.Value, error) {
	role, _ := m.Get("role")
	content, err := vllmContent(valueOr(m, "content", jinja.None()), openai)
	if err != nil {
		return jinja.Undefined(), err
	}
	out := jinja.NewDict()
	d := out.AsDict()
	d.Set("role", role)
	d.Set("content", content)
	switch {
	case role.IsString() && role.AsString() == "assistant":
		if calls, ok := present(m, "tool_calls"); ok {
			if err := vllmToolCalls(d, calls); err != nil {
				return jinja.Undefined(), err
			}
		}
		if r, ok := present(m, "reasoning"); ok {
			d.Set("reasoning", r)
			d.Set("reasoning_content", r)
		}
	case role.IsString() && role.AsString() == "tool":
		if id, ok := m.Get("tool_call_id"); ok {
			d.Set("tool_call_id", id)
		}
		if openai {
			d.Set("content", joinTextParts(content))
		}
	}
	for _, k := range []string{"name", "task"} {
		if v, ok := m.Get(k); ok && v.IsString() {
			d.Set(k, v)
		}
	}
	if role.IsString() && role.AsString() == "developer" {
		d.Set("tools", valueOr(m, "tools", jinja.None()))
	}
	return out, nil
}

// vllmContent flattens content: for "string" templates the texts are joined with "\n"
// (null and "" give ""); for "openai" templates it is a list of {"type": "text", "text": …}
// parts, a plain string becoming one such part. Empty texts are skipped, as vLLM's
// `if parse_res:` does.
func vllmContent(content jinja.Value, openai bool) (jinja.Value, error) {
	var parts []jinja.Value
	switch {
	case content.IsNone():
	case content.IsString():
		parts = []jinja.Value{textPart(content.AsString())}
	case content.IsList():
		parts = content.AsList().Items
	default:
		return jinja.Undefined(), errors.New("content must be a string, an array or null")
	}
	var texts []string
	var wrapped []jinja.Value
	for i, p := range parts {
		text, err := vllmPartText(p)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("content[%d]: %w", i, err)
		}
		if text == "" {
			continue
		}
		texts = append(texts, text)
		wrapped = append(wrapped, textPart(text))
	}
	if openai {
		return jinja.NewList(wrapped), nil
	}
	return partsText(texts, "\n"), nil
}

// vllmPartText returns the text of one content part, "" for a part vLLM skips.
func vllmPartText(p jinja.Value) (string, error) {
	if p.IsString() {
		return p.AsString(), nil
	}
	if !p.IsDict() {
		return "", errors.New("content part must be a string or an object")
	}
	d := p.AsDict()
	typ, hasType := present(d, "type")
	if !hasType || !typ.IsString() {
		for k := range mediaPartTypes {
			if d.Has(k) {
				return "", ErrMultimodal
			}
		}
		return "", errors.New("content part has no 'type'")
	}
	if _, ok := mediaPartTypes[typ.AsString()]; ok {
		return "", ErrMultimodal
	}
	key, ok := textPartKeys[typ.AsString()]
	if !ok {
		return "", fmt.Errorf("unknown content part type %q", typ.AsString())
	}
	text, ok := present(d, key)
	if !ok {
		return "", nil
	}
	if !text.IsString() {
		return "", fmt.Errorf("content part %q must be a string", key)
	}
	return text.AsString(), nil
}

// joinTextParts joins the texts of {"type": "text"} parts with "\n".
func joinTextParts(parts jinja.Value) jinja.Value {
	var texts []string
	for _, p := range parts.AsList().Items {
		text, _ := get(p, "text")
		texts = append(texts, text.AsString())
	}
	return partsText(texts, "\n")
}

// textPart returns {"type": "text", "text": s}.
func textPart(s string) jinja.Value {
	v := jinja.NewDict()
	v.AsDict().Set("type", jinja.NewString("text"))
	v.AsDict().Set("text", jinja.NewString(s))
	return v
}

// vllmToolCalls sets d's tool_calls as _postprocess_messages leaves them: an empty list is
// dropped so the template takes its plain assistant path, JSON-string arguments are parsed
// into objects (templates print them with tojson) and missing or empty arguments become {}.
func vllmToolCalls(d *jinja.Dict, calls jinja.Value) error {
	if !calls.IsList() {
		d.Set("tool_calls", calls)
		return nil
	}
	if calls.AsList().Len() == 0 {
		return nil
	}
	for i, c := range calls.AsList().Items {
		fn, ok := get(c, "function")
		if !ok || !fn.IsDict() {
			return fmt.Errorf("tool_calls[%d].function must be an object", i)
		}
		args, err := parseArguments(valueOr(fn.AsDict(), "arguments", jinja.None()), true)
		if err != nil {
			return fmt.Errorf("tool_calls[%d]: %w", i, err)
		}
		fn.AsDict().Set("arguments", args)
	}
	d.Set("tool_calls", calls)
	return nil
}

// parseArguments turns a JSON-string arguments value into the object it encodes, as both
// engines do before rendering. With emptyToObject (vLLM), null, "" and other falsy values
// become {}.
func parseArguments(args jinja.Value, emptyToObject bool) (jinja.Value, error) {
	if !args.IsTruthy() {
		if emptyToObject {
			return jinja.NewDict(), nil
		}
		return args, nil
	}
	if args.IsDict() || args.IsList() || !args.IsString() {
		return args, nil
	}
	v, err := decodeValue(json.RawMessage(args.AsString()))
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("arguments are not JSON: %w", err)
	}
	return v, nil
}

// vllmTool is the tool as vLLM's ChatCompletionToolsParam.model_dump() returns it: type
// and function first, function holding name, description and parameters (null when the
// request omits them), each followed by the request's extra keys.
func vllmTool(t, fn *jinja.Dict) jinja.Value {
	f := ordered([]string{"name", "description", "parameters"}, map[string]jinja.Value{
		"name":        valueOr(fn, "name", jinja.None()),
		"description": valueOr(fn, "description", jinja.None()),
		"parameters":  valueOr(fn, "parameters", jinja.None()),
	}, fn)
	return ordered([]string{"type", "function"}, map[string]jinja.Value{
		"type":     valueOr(t, "type", jinja.NewString("function")),
		"function": f,
	}, t)
}
