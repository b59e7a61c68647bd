package chattemplate

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/ardanlabs/jinja"

	"github.com/routerkit/router/runtime/arena"
	"github.com/routerkit/router/runtime/token"
)

// Template is a compiled chat template. It holds no per-render state, so one Template is
// safe for concurrent use: every Render builds its own values from the request's JSON.
type Template struct {
	tpl *jinja.Template
	src string
	// native renders what it can of this template without the Jinja engine; nil for
	// most templates (see nativeRenderer).
	native *nativeRenderer
	// openaiVLLM and openaiSGLang record whether each engine hands this template content
	// as a list of parts ("openai" format) rather than a string.
	openaiVLLM, openaiSGLang bool
}

// Options are the per-request inputs of a render besides the conversation.
type Options struct {
	// AddGenerationPrompt appends the assistant header the model continues from, as the
	// request's add_generation_prompt does (vLLM's default is true; SGLang always sets it).
	AddGenerationPrompt bool
	// BOSToken and EOSToken are the tokenizer's special tokens; "" leaves the variable
	// undefined, as HF does for a token set to null.
	BOSToken, EOSToken string
	// Engine is the engine whose message handling the render reproduces.
	Engine Engine
}

// RaiseError is a template's own refusal of a conversation through raise_exception, e.g.
// "Conversation roles must alternate user/assistant". Its message is the template's, and
// the engines answer it with 400, so the router can too.
type RaiseError struct {
	Message string
}

func (e *RaiseError) Error() string { return e.Message }

// Parse compiles a chat template. A construct the Jinja engine cannot parse is an error
// that names it and its line.
func Parse(src string) (*Template, error) {
	tpl, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("compile chat template: %w", err)
	}
	t := &Template{tpl: tpl, src: src, native: nativeFor(src)}
	for _, m := range contentLoop.FindAllStringSubmatch(src, -1) {
		t.openaiVLLM = true
		switch m[1] {
		case "message", "msg", "m":
			t.openaiSGLang = true
		}
	}
	return t, nil
}

// contentLoop finds `{% for x in message.content %}` (or message['content'], with filters
// or slices after it): the loop over content parts by which vLLM (renderers/hf.py,
// _detect_content_format) and SGLang (jinja_template_utils.py,
// detect_jinja_template_content_format) decide a template wants content parts. Both walk
// Jinja's AST; SGLang only accepts the loop variables message, msg and m, and vLLM any
// variable bound to the messages, which this source scan approximates by any name.
var contentLoop = regexp.MustCompile(`\{%-?\s*for\s+\w+\s+in\s+(\w+)\s*(?:\.\s*content\b|\[\s*['"]content['"]\s*\])`)

// Render returns the prompt the engine renders for c. A template's raise_exception is
// returned as a *RaiseError; an input the engine would reject is an error too.
func (t *Template) Render(c token.Chat, o Options) (string, error) {
	// A template that takes content as parts gets its strings rebuilt: only the variables
	// do that.
	if t.native != nil && c.Parsed != nil && !t.openai(o.Engine) {
		if out, ok := t.native.tree(c, o); ok {
			return out, nil
		}
	}
	vars, err := t.vars(c, o)
	if err != nil {
		return "", err
	}
	var prefix string
	if o.Engine == SGLang {
		vars["messages"], prefix = sglangFinalAssistant(vars["messages"], c.ContinueFinalMessage)
	}
	out, err := t.render(vars, c.Arena)
	return out + prefix, err
}

// render executes the template with prepared variables, natively (into a) when it can.
func (t *Template) render(vars map[string]jinja.Value, a *arena.Bytes) (string, error) {
	if t.native != nil {
		if out, ok := t.native.vars(vars, a); ok {
			return out, nil
		}
	}
	out, err := t.tpl.RenderValues(vars)
	if err != nil {
		if _, ok := errors.AsType[*RaiseError](err); ok {
			return "", err
		}
		return "", fmt.Errorf("render chat template: %w", err)
	}
	return out, nil
}

// vars builds the template's variables as HF's apply_chat_template passes them: messages,
// tools (undefined for None), documents (None), add_generation_prompt and the special
// tokens, with every chat_template_kwargs key on top (HF merges them over the special
// tokens). Kwargs cannot replace messages, tools or add_generation_prompt: vLLM merges the
// request's add_generation_prompt over the kwargs (vllm/renderers/params.py, merge_kwargs)
// and SGLang passes its own (always true). SGLang passes reasoning_effort only when the
// request has one (see sglangReasoningEffort).
func (t *Template) vars(c token.Chat, o Options) (map[string]jinja.Value, error) {
	var rawMsgs, rawTools, kwargs jinja.Value
	if p := c.Parsed; p != nil {
		rawMsgs, rawTools, kwargs = treeValue(p.Messages), treeValue(p.Tools), treeValue(p.Kwargs)
	} else {
		var err error
		if rawMsgs, err = decodeValue(c.Messages); err != nil {
			return nil, fmt.Errorf("decode messages: %w", err)
		}
		if rawTools, err = decodeValue(c.Tools); err != nil {
			return nil, fmt.Errorf("decode tools: %w", err)
		}
		if kwargs, err = decodeValue(c.Kwargs); err != nil {
			return nil, fmt.Errorf("decode chat_template_kwargs: %w", err)
		}
	}
	msgs, err := o.Engine.messages(rawMsgs, t.openai(o.Engine))
	if err != nil {
		return nil, err
	}
	tools, err := o.Engine.tools(rawTools)
	if err != nil {
		return nil, err
	}
	if !kwargs.IsUndefined() && !kwargs.IsNone() && !kwargs.IsDict() {
		return nil, errors.New("chat_template_kwargs must be an object")
	}

	vars := map[string]jinja.Value{
		"documents":       jinja.None(),
		"raise_exception": raiseException,
	}
	if o.BOSToken != "" {
		vars["bos_token"] = jinja.NewString(o.BOSToken)
	}
	if o.EOSToken != "" {
		vars["eos_token"] = jinja.NewString(o.EOSToken)
	}
	agp := o.AddGenerationPrompt
	if o.Engine == SGLang {
		agp = true // serving_chat.py passes add_generation_prompt=True whatever the request says
		if err := sglangReasoningEffort(vars, c.ReasoningEffort); err != nil {
			return nil, err
		}
	}
	if kwargs.IsDict() {
		for _, k := range kwargs.AsDict().Keys {
			vars[k] = kwargs.AsDict().Data[k]
		}
	}
	for _, v := range []jinja.Value{msgs, tools, kwargs, vars["reasoning_effort"]} {
		if err := checkFloats(v); err != nil {
			return nil, err
		}
	}
	vars["messages"] = msgs
	vars["add_generation_prompt"] = jinja.NewBool(agp)
	delete(vars, "tools")
	if !tools.IsUndefined() {
		vars["tools"] = tools
	}
	return vars, nil
}

// openai reports whether engine e hands this template content as parts.
func (t *Template) openai(e Engine) bool {
	if e == SGLang {
		return t.openaiSGLang
	}
	return t.openaiVLLM
}

// raiseException replaces the library's raise_exception so that a template's refusal is
// told apart from a failure of the Jinja engine (HF raises jinja2.TemplateError(message)).
var raiseException = jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), &RaiseError{Message: "raise_exception called without a message"}
	}
	msg := args[0].String()
	if args[0].IsString() {
		msg = args[0].AsString()
	}
	return jinja.Undefined(), &RaiseError{Message: msg}
})
