package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// decodeBody decodes a client's JSON body into v strictly (package strictjson): a key
// repeated in one object, or differing from a field the router reads only by case, is a
// 400, because the engine would read a different value than the router routed on.
func decodeBody(body []byte, v any) *httpError {
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
		return &httpError{status: http.StatusBadRequest, code: codeInvalidRequest, msg: keyErr.Error()}
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return &httpError{status: http.StatusBadRequest, code: codeInvalidRequest, msg: fmt.Sprintf("%s: expected %s, got JSON %s", typeErr.Field, typeErr.Type, typeErr.Value)}
	}
	return &httpError{status: http.StatusBadRequest, code: codeInvalidJSON, msg: "request body is not a JSON object: " + err.Error()}
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
func decodeChat(body []byte) (req chatRequest, msgs []token.Message, parsed *token.ParsedChat, herr *httpError) {
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
			// A copy: the name outlives the request in the recent decisions of an
			// unknown model, and a substring would keep the whole body alive.
			if ok = setPtr(&req.Model, e, strictjson.String, &e.Str); ok && req.Model != nil {
				req.Model = new(strings.Clone(*req.Model))
			}
		case "messages":
			req.Messages, parsed.Messages = body[e.Start:e.End], e
		case "tools":
			req.Tools, parsed.Tools = body[e.Start:e.End], e
		case "chat_template_kwargs":
			req.ChatTemplateKwargs, parsed.Kwargs = body[e.Start:e.End], e
		case "add_generation_prompt":
			ok = setPtr(&req.AddGenerationPrompt, e, strictjson.Bool, &e.Bool)
		case "stream":
			switch e.Kind {
			case strictjson.Bool:
				req.Stream = e.Bool
			case strictjson.Null:
			default:
				ok = false
			}
		case "max_tokens":
			ok = setInt(&req.MaxTokens, e)
		case "max_completion_tokens":
			ok = setInt(&req.MaxCompletionTokens, e)
		case "n":
			ok = setInt(&req.N, e)
		case "top_k":
			ok = setInt(&req.TopK, e)
		case "temperature":
			ok = setFloat(&req.Temperature, e)
		case "top_p":
			ok = setFloat(&req.TopP, e)
		case "min_p":
			ok = setFloat(&req.MinP, e)
		case "frequency_penalty":
			ok = setFloat(&req.FrequencyPenalty, e)
		case "presence_penalty":
			ok = setFloat(&req.PresencePenalty, e)
		case "repetition_penalty":
			ok = setFloat(&req.RepetitionPenalty, e)
		}
		if !ok {
			return nil, false
		}
	}
	return parsed, true
}

// The setters follow encoding/json: null leaves a pointer nil, and a value of another
// JSON type, or a number the field cannot hold, is refused.

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
