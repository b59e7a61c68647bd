package request

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// decodeBody decodes a client's JSON body into v strictly (package strictjson): a key
// repeated in one object, or differing from a field the router reads only by case, is a
// refused, because the engine would read a different value than the router routed on.
func decodeBody(body []byte, v any) *Error {
	err := strictjson.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var (
		typeErr *json.UnmarshalTypeError
		keyErr  *strictjson.KeyError
	)
	switch {
	case errors.As(err, &keyErr):
		return &Error{Kind: Invalid, Msg: keyErr.Error()}
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return &Error{Kind: Invalid, Msg: fmt.Sprintf("%s: expected %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)}
	}
	return &Error{Kind: InvalidJSON, Msg: "request body is not a JSON object: " + err.Error()}
}

// messageShape is the keys token.Message reads: role, and content as a string or a list
// of parts with type and text.
type messageShape struct {
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func init() { strictjson.RegisterShape[token.Message, messageShape]() }

// decodeChat decodes a chat request body in one pass (strictjson.Parse) into the fields
// the router reads, the messages as the tokenizer sees them (nil when not decoded here)
// and the parsed messages, tools and template arguments the chat template renders.
//
// A body that the one pass does not take whole (a refused key, a syntax error, a value
// of a type the field does not hold, messages the checks refuse) is decoded again by the
// general strict decoder, and then its messages by validateMessages, so a client gets the
// same error whichever way its body went. FuzzDecodeChat checks that both ways agree on
// every body the one pass accepts.
func decodeChat(body []byte) (req chatRequest, msgs []token.Message, parsed *token.ParsedChat, herr *Error) {
	if v, err := strictjson.Parse(body, &req); err == nil {
		if parsed, ok := fillChat(&req, &v, body); ok {
			if msgs, ok := chatMessages(parsed.Messages); ok {
				return req, msgs, parsed, nil
			}
		}
	}
	req = chatRequest{}
	return req, nil, nil, decodeBody(body, &req)
}

// fillChat sets req's fields from the parsed body v as encoding/json would, and reports
// false for a value json would refuse (the caller then lets json say why).
func fillChat(req *chatRequest, v *strictjson.Value, body []byte) (*token.ParsedChat, bool) {
	if v.Kind != strictjson.Object {
		return nil, false
	}
	parsed := &token.ParsedChat{}
	for i, k := range v.Keys {
		e := &v.Elems[i]
		ok := true
		switch k {
		case "model":
			ok = setModel(&req.Model, e)
		case "messages":
			req.Messages, parsed.Messages = body[e.Start:e.End], e
		case "tools":
			req.Tools, parsed.Tools = body[e.Start:e.End], e
		case "chat_template_kwargs":
			req.ChatTemplateKwargs, parsed.Kwargs = body[e.Start:e.End], e
		case "add_generation_prompt":
			ok = setPtr(&req.AddGenerationPrompt, e, strictjson.Bool, &e.Bool)
		case "stream":
			ok = setBool(&req.Stream, e)
		case "max_tokens":
			ok = setInt(&req.MaxTokens, e)
		case "max_completion_tokens":
			ok = setInt(&req.MaxCompletionTokens, e)
		case "n":
			ok = setInt(&req.N, e)
		default:
			ok = req.sampling.set(k, e)
		}
		if !ok {
			return nil, false
		}
	}
	return parsed, true
}

// set sets the sampling parameter named key from v; any other key is left alone.
func (sp *sampling) set(key string, v *strictjson.Value) bool {
	switch key {
	case "top_k":
		return setInt(&sp.TopK, v)
	case "temperature":
		return setFloat(&sp.Temperature, v)
	case "top_p":
		return setFloat(&sp.TopP, v)
	case "min_p":
		return setFloat(&sp.MinP, v)
	case "frequency_penalty":
		return setFloat(&sp.FrequencyPenalty, v)
	case "presence_penalty":
		return setFloat(&sp.PresencePenalty, v)
	case "repetition_penalty":
		return setFloat(&sp.RepetitionPenalty, v)
	}
	return true
}

// fieldSetter sets the field of a request of type T that one key names from its parsed
// value v, whose bytes in the body are raw, as encoding/json would, and reports false
// for a value json would refuse.
type fieldSetter[T any] func(req *T, v *strictjson.Value, raw []byte) bool

// decodeOnePass decodes a request body in one pass, as decodeChat does for chats: the
// body is parsed once (strictjson.Parse) and each key with a setter in fields sets its
// field; other keys are ignored, as json ignores them. A body the pass does not take
// whole is decoded again by the general strict decoder, whose error the client gets.
// FuzzDecodeRequests checks that both ways agree. The parsed body is returned, nil when
// the pass did not take it, for the values that are read further (promptsOf).
func decodeOnePass[T any](body []byte, req *T, fields map[string]fieldSetter[T]) (*strictjson.Value, *Error) {
	if v, err := strictjson.Parse(body, req); err == nil && v.Kind == strictjson.Object && setFields(req, &v, body, fields) {
		return &v, nil
	}
	*req = *new(T)
	return nil, decodeBody(body, req)
}

func setFields[T any](req *T, v *strictjson.Value, body []byte, fields map[string]fieldSetter[T]) bool {
	for i, k := range v.Keys {
		e := &v.Elems[i]
		if set := fields[k]; set != nil && !set(req, e, body[e.Start:e.End]) {
			return false
		}
	}
	return true
}

// The setters of request types' fields, for decodeOnePass.

func modelField[T any](field func(*T) **string) fieldSetter[T] {
	return func(req *T, v *strictjson.Value, _ []byte) bool { return setModel(field(req), v) }
}

func rawField[T any](field func(*T) *json.RawMessage) fieldSetter[T] {
	return func(req *T, _ *strictjson.Value, raw []byte) bool { *field(req) = raw; return true }
}

func intField[T any](field func(*T) **int64) fieldSetter[T] {
	return func(req *T, v *strictjson.Value, _ []byte) bool { return setInt(field(req), v) }
}

func boolField[T any](field func(*T) *bool) fieldSetter[T] {
	return func(req *T, v *strictjson.Value, _ []byte) bool { return setBool(field(req), v) }
}

// withSampling adds the setters of the sampling parameters to fields.
func withSampling[T any](fields map[string]fieldSetter[T], sp func(*T) *sampling) map[string]fieldSetter[T] {
	for _, key := range []string{"top_k", "temperature", "top_p", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty"} {
		fields[key] = func(req *T, v *strictjson.Value, _ []byte) bool { return sp(req).set(key, v) }
	}
	return fields
}

// The setters follow encoding/json: null leaves a pointer nil, and a value of another
// JSON type, or a number the field cannot hold, is refused.

// setModel sets a model name. It is a copy: the name outlives the request in the recent
// decisions of an unknown model, and a substring would keep the whole body alive.
func setModel(dst **string, v *strictjson.Value) bool {
	ok := setPtr(dst, v, strictjson.String, &v.Str)
	if ok && *dst != nil {
		*dst = new(strings.Clone(**dst))
	}
	return ok
}

// setBool sets a bool; null leaves it as it is.
func setBool(dst *bool, v *strictjson.Value) bool {
	switch v.Kind {
	case strictjson.Bool:
		*dst = v.Bool
	case strictjson.Null:
	default:
		return false
	}
	return true
}

// setPtr points *dst at val when v is of the kind, and clears it when v is null.
func setPtr[T any](dst **T, v *strictjson.Value, kind strictjson.Kind, val *T) bool {
	switch v.Kind {
	case strictjson.Null:
		*dst = nil
	case kind:
		*dst = val
	default:
		return false
	}
	return true
}

func setInt(dst **int64, v *strictjson.Value) bool {
	switch v.Kind {
	case strictjson.Null:
		*dst = nil
		return true
	case strictjson.Number:
		n, err := strconv.ParseInt(v.Str, 10, 64)
		if err != nil {
			return false
		}
		*dst = &n
		return true
	}
	return false
}

func setFloat(dst **float64, v *strictjson.Value) bool {
	switch v.Kind {
	case strictjson.Null:
		*dst = nil
		return true
	case strictjson.Number:
		f, err := strconv.ParseFloat(v.Str, 64)
		if err != nil {
			return false
		}
		*dst = &f
		return true
	}
	return false
}

// chatMessages reads parsed messages as token.Message's UnmarshalJSON does, with the
// key check and the checks of token.CheckDecoded, and reports false for anything those
// would refuse or that is not plainly an object with a string role.
func chatMessages(v *strictjson.Value) ([]token.Message, bool) {
	if v == nil || v.Kind != strictjson.Array || len(v.Elems) == 0 || !v.KeysMatch((*[]token.Message)(nil)) {
		return nil, false
	}
	msgs := make([]token.Message, len(v.Elems))
	for i := range v.Elems {
		e := &v.Elems[i]
		if e.Kind != strictjson.Object {
			return nil, false
		}
		if r := e.Get("role"); r != nil && r.Kind == strictjson.String {
			msgs[i].Role = r.Str
		}
		if msgs[i].Role == "" {
			return nil, false
		}
		content, ok := messageContent(e.Get("content"))
		if !ok {
			return nil, false
		}
		msgs[i].Content = content
	}
	return msgs, true
}

// messageContent is a message's content as token.Message reads it: a string, nothing for
// null or an absent content, and the text of the text parts of an array, joined with
// newlines.
func messageContent(v *strictjson.Value) (string, bool) {
	if v == nil {
		return "", true
	}
	switch v.Kind {
	case strictjson.Null:
		return "", true
	case strictjson.String:
		return v.Str, true
	case strictjson.Array:
	default:
		return "", false
	}
	var texts []string
	for i := range v.Elems {
		part := &v.Elems[i]
		switch part.Kind {
		case strictjson.Null:
			continue
		case strictjson.Object:
		default:
			return "", false
		}
		typ, text := part.Get("type"), part.Get("text")
		if typ != nil && typ.Kind != strictjson.String && typ.Kind != strictjson.Null ||
			text != nil && text.Kind != strictjson.String && text.Kind != strictjson.Null {
			return "", false
		}
		if typ != nil && typ.Kind == strictjson.String && typ.Str == "text" && text != nil && text.Kind == strictjson.String {
			texts = append(texts, text.Str)
		}
	}
	return strings.Join(texts, "\n"), true
}
