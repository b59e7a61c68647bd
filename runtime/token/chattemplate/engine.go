package chattemplate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"

	"github.com/routerkit/router/runtime/token"
)

// Engine is the serving engine whose request handling a render reproduces. Both engines
// end in HF transformers' apply_chat_template, but each first rebuilds the request's
// messages and tools in its own way (see the package documentation), and those rebuilt
// values are what the template prints.
type Engine int

const (
	// VLLM reproduces vLLM's OpenAI server (the zero value).
	VLLM Engine = iota
	// SGLang reproduces SGLang's OpenAI server.
	SGLang
)

// String returns the engine's name as used in configuration.
func (e Engine) String() string {
	switch e {
	case VLLM:
		return "vllm"
	case SGLang:
		return "sglang"
	}
	return fmt.Sprintf("engine(%d)", int(e))
}

// ErrMultimodal is returned for a message with image, audio or video parts that vLLM would
// turn into placeholders or reject: the router cannot tell which, so it cannot predict the
// prompt and should fall back to the engine's own count.
var ErrMultimodal = fmt.Errorf("content part is multimodal: %w", token.ErrUnpredictable)

// textPartKeys maps the text-like content part types vLLM accepts to the key holding their
// text (vllm/entrypoints/chat_utils.py, MM_PARSER_MAP).
var textPartKeys = map[string]string{
	"text":        "text",
	"input_text":  "text",
	"output_text": "text",
	"refusal":     "refusal",
	"thinking":    "thinking",
}

// mediaPartTypes are vLLM's multimodal part types, and the modality each stands for.
var mediaPartTypes = map[string]string{
	"image_url":    "image",
	"input_image":  "image",
	"image_embeds": "image",
	"image_pil":    "image",
	"audio_url":    "audio",
	"input_audio":  "audio",
	"audio_embeds": "audio",
	"video_url":    "video",
}

// messages rebuilds the request's messages as engine e hands them to the template. openai
// says whether the template iterates over message content (vLLM's and SGLang's "openai"
// content format) rather than printing it as a string.
func (e Engine) messages(raw jinja.Value, openai bool) (jinja.Value, error) {
	if !raw.IsList() {
		return jinja.Undefined(), errors.New("messages must be an array")
	}
	items := raw.AsList().Items
	out := make([]jinja.Value, len(items))
	for i, m := range items {
		if !m.IsDict() {
			return jinja.Undefined(), fmt.Errorf("messages[%d] must be an object", i)
		}
		var err error
		if e == SGLang {
			out[i], err = sglangMessage(m.AsDict(), openai)
		} else {
			out[i], err = vllmMessage(m.AsDict(), openai)
		}
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	return jinja.NewList(out), nil
}

// tools rebuilds the request's tools as engine e passes them to apply_chat_template; an
// undefined result means tools=None.
func (e Engine) tools(raw jinja.Value) (jinja.Value, error) {
	if raw.IsUndefined() || raw.IsNone() {
		return jinja.Undefined(), nil
	}
	if !raw.IsList() {
		return jinja.Undefined(), errors.New("tools must be an array")
	}
	items := raw.AsList().Items
	if e == SGLang && len(items) == 0 {
		// SGLang tests `if request.tools`, so an empty list is None.
		return jinja.Undefined(), nil
	}
	out := make([]jinja.Value, len(items))
	for i, t := range items {
		fn, ok := get(t, "function")
		if !ok || !fn.IsDict() {
			return jinja.Undefined(), fmt.Errorf("tools[%d].function must be an object", i)
		}
		if e == SGLang {
			out[i] = sglangFunction(fn.AsDict())
		} else {
			out[i] = vllmTool(t.AsDict(), fn.AsDict())
		}
	}
	return jinja.NewList(out), nil
}

// get returns v[key] when v is an object that has key.
func get(v jinja.Value, key string) (jinja.Value, bool) {
	if !v.IsDict() {
		return jinja.Undefined(), false
	}
	return v.AsDict().Get(key)
}

// present reports whether key is set to something other than null.
func present(d *jinja.Dict, key string) (jinja.Value, bool) {
	v, ok := d.Get(key)
	return v, ok && !v.IsNone()
}

// ordered builds an object from fields in the order given, then the keys of extra that are
// not among them, in extra's order: how pydantic dumps a model with extra="allow".
func ordered(fields []string, values map[string]jinja.Value, extra *jinja.Dict) jinja.Value {
	out := jinja.NewDict()
	d := out.AsDict()
	for _, f := range fields {
		d.Set(f, values[f])
	}
	if extra != nil {
		for _, k := range extra.Keys {
			if !d.Has(k) {
				d.Set(k, extra.Data[k])
			}
		}
	}
	return out
}

// valueOr returns d[key], or def when it is absent.
func valueOr(d *jinja.Dict, key string, def jinja.Value) jinja.Value {
	if v, ok := d.Get(key); ok {
		return v
	}
	return def
}

// partsText returns the texts of content parts joined by sep, as the engines flatten
// content for templates that print it as a string.
func partsText(parts []string, sep string) jinja.Value {
	return jinja.NewString(strings.Join(parts, sep))
}
