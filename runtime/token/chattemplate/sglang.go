package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// sglangGenericFields are the fields of SGLang's ChatCompletionMessageGenericParam in
// declaration order, which is the order model_dump() writes them; a user message has only
// role and content (python/sglang/srt/entrypoints/openai/protocol.py).
var sglangGenericFields = []string{"role", "content", "tool_call_id", "name", "reasoning_content", "tool_calls"}

// sglangMessage rebuilds one message as SGLang's _apply_jinja_template does
// (python/sglang/srt/entrypoints/openai/serving_chat.py): null content becomes "", the
// pydantic model is dumped in field order, keys set to null are dropped and array content
// is flattened (python/sglang/srt/jinja_template_utils.py,
// process_content_for_template_format): for "string" templates the text parts are joined
// with a space and other parts ignored. JSON-string tool-call arguments are parsed.
func sglangMessage(m *jinja.Dict, openai bool) (jinja.Value, error) {
	role, _ := m.Get("role")
	if !role.IsString() {
		return jinja.Undefined(), errors.New("role must be a string")
	}
	fields := sglangGenericFields
	if role.AsString() == "user" {
		fields = fields[:2]
	} else {
		role = jinja.NewString(strings.ToLower(role.AsString()))
	}
	content, err := sglangContent(valueOr(m, "content", jinja.None()), openai)
	if err != nil {
		return jinja.Undefined(), err
	}
	out := jinja.NewDict()
	d := out.AsDict()
	for _, f := range fields {
		var v jinja.Value
		switch f {
		case "role":
			v = role
		case "content":
			v = content
		case "tool_calls":
			v, err = sglangToolCalls(valueOr(m, f, jinja.None()))
			if err != nil {
				return jinja.Undefined(), err
			}
		default:
			v = valueOr(m, f, jinja.None())
		}
		if !v.IsNone() {
			d.Set(f, v)
		}
	}
	return out, nil
}

// sglangContent flattens content for SGLang: strings pass unchanged (null is ""); an array
// becomes its text parts joined by " " for "string" templates, or the parts themselves for
// "openai" templates, media parts reduced to {"type": "image"|"video"|"audio"}.
func sglangContent(content jinja.Value, openai bool) (jinja.Value, error) {
	switch {
	case content.IsNone():
		return jinja.NewString(""), nil
	case content.IsString():
		return content, nil
	case !content.IsList():
		return jinja.Undefined(), errors.New("content must be a string, an array or null")
	}
	var texts []string
	var parts []jinja.Value
	for i, p := range content.AsList().Items {
		typ, _ := get(p, "type")
		if !typ.IsString() {
			return jinja.Undefined(), fmt.Errorf("content[%d] has no 'type'", i)
		}
		switch t := typ.AsString(); t {
		case "text":
			text, _ := get(p, "text")
			if !text.IsString() {
				return jinja.Undefined(), fmt.Errorf("content[%d].text must be a string", i)
			}
			texts = append(texts, text.AsString())
			parts = append(parts, textPart(text.AsString()))
		case "image_url", "video_url", "audio_url":
			media := jinja.NewDict()
			media.AsDict().Set("type", jinja.NewString(strings.TrimSuffix(t, "_url")))
			parts = append(parts, media)
		default:
			parts = append(parts, p)
		}
	}
	if openai {
		return jinja.NewList(parts), nil
	}
	return partsText(texts, " "), nil
}

// sglangToolCalls dumps tool calls as SGLang's ToolCall model does (id, index, type,
// function with name and arguments; unset fields null) and parses JSON-string arguments.
func sglangToolCalls(calls jinja.Value) (jinja.Value, error) {
	if !calls.IsList() {
		return calls, nil
	}
	items := calls.AsList().Items
	out := make([]jinja.Value, len(items))
	for i, c := range items {
		fn, ok := get(c, "function")
		if !ok || !fn.IsDict() {
			return jinja.Undefined(), fmt.Errorf("tool_calls[%d].function must be an object", i)
		}
		args, err := parseArguments(valueOr(fn.AsDict(), "arguments", jinja.None()), false)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("tool_calls[%d]: %w", i, err)
		}
		f := ordered([]string{"name", "arguments"}, map[string]jinja.Value{
			"name":      valueOr(fn.AsDict(), "name", jinja.None()),
			"arguments": args,
		}, nil)
		call := c.AsDict()
		out[i] = ordered([]string{"id", "index", "type", "function"}, map[string]jinja.Value{
			"id":       valueOr(call, "id", jinja.None()),
			"index":    valueOr(call, "index", jinja.None()),
			"type":     valueOr(call, "type", jinja.NewString("function")),
			"function": f,
		}, nil)
	}
	return jinja.NewList(out), nil
}

// sglangFunction is a tool as SGLang passes it to the template: only its function, dumped
// from the Function model (description, name, parameters, strict defaulting to false);
// other keys are dropped.
func sglangFunction(fn *jinja.Dict) jinja.Value {
	return ordered([]string{"description", "name", "parameters", "strict"}, map[string]jinja.Value{
		"description": valueOr(fn, "description", jinja.None()),
		"name":        valueOr(fn, "name", jinja.None()),
		"parameters":  valueOr(fn, "parameters", jinja.None()),
		"strict":      valueOr(fn, "strict", jinja.NewBool(false)),
	}, nil)
}

// sglangReasoningEffort sets the variables SGLang derives from a request's top-level
// reasoning_effort (python/sglang/srt/entrypoints/openai/protocol.py at 004c82e0,
// ChatCompletionRequest.normalize_reasoning_inputs; serving_chat.py at 002897c2,
// _apply_jinja_template): the effort itself, passed to the template only when the request
// has one (a template's own default applies otherwise: gpt-oss renders "medium"), and
// thinking and enable_thinking, false for "none" and true for any other effort, under
// the request's chat_template_kwargs, which the caller sets after.
func sglangReasoningEffort(vars map[string]jinja.Value, raw json.RawMessage) error {
	effort, err := decodeValue(raw)
	if err != nil {
		return fmt.Errorf("decode reasoning_effort: %w", err)
	}
	if effort.IsUndefined() || effort.IsNone() {
		return nil
	}
	vars["reasoning_effort"] = effort
	thinking := jinja.NewBool(!effort.IsString() || effort.AsString() != "none")
	vars["thinking"], vars["enable_thinking"] = thinking, thinking
	return nil
}

// sglangFinalAssistant applies SGLang's _handle_last_assistant_message (serving_chat.py
// at 002897c2) to the rebuilt messages: a final assistant message whose content is a
// string becomes a user message of that content alone, or, with continue_final_message,
// is removed and its content returned, which SGLang appends to the rendered prompt.
// Content kept as parts (an "openai" template's) is left as it is.
func sglangFinalAssistant(msgs jinja.Value, continueFinal bool) (jinja.Value, string) {
	if !msgs.IsList() || len(msgs.AsList().Items) == 0 {
		return msgs, ""
	}
	items := msgs.AsList().Items
	last := items[len(items)-1].AsDict()
	role, _ := last.Get("role")
	content, _ := last.Get("content")
	if !role.IsString() || role.AsString() != "assistant" || !content.IsString() {
		return msgs, ""
	}
	out := make([]jinja.Value, len(items)-1, len(items))
	copy(out, items)
	if continueFinal {
		return jinja.NewList(out), content.AsString()
	}
	user := jinja.NewDict()
	user.AsDict().Set("role", jinja.NewString("user"))
	user.AsDict().Set("content", content)
	return jinja.NewList(append(out, user)), ""
}
