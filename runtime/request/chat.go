package request

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/arena"
	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// chatRequest is the part of an OpenAI chat completion request the router validates and
// routes on. The body itself is forwarded as the client sent it.
type chatRequest struct {
	Model    *string         `json:"model"`
	Messages json.RawMessage `json:"messages"`
	// Tools and ChatTemplateKwargs reach the chat template as the client wrote them.
	Tools               json.RawMessage `json:"tools"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	// ReasoningEffort and ContinueFinalMessage shape SGLang's prompt (see token.Chat).
	ReasoningEffort      json.RawMessage `json:"reasoning_effort"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	Stream               bool            `json:"stream"`
	MaxTokens            *int64          `json:"max_tokens"`
	MaxCompletionTokens  *int64          `json:"max_completion_tokens"`
	N                    *int64          `json:"n"`
	sampling
}

// sampling holds the sampling parameters the router checks, under the names the OpenAI
// APIs and SGLang's sampling_params share.
type sampling struct {
	Temperature       *float64 `json:"temperature"`
	TopP              *float64 `json:"top_p"`
	TopK              *int64   `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	FrequencyPenalty  *float64 `json:"frequency_penalty"`
	PresencePenalty   *float64 `json:"presence_penalty"`
	RepetitionPenalty *float64 `json:"repetition_penalty"`
}

// Chat reads and validates a chat request and extracts its routing facts: the
// model's resolver, the input token count and ids, the expected peak, and the session and
// routing keys from the model's configured headers.
//
// The decoded strings and the rendered prompt are cut from an arena (package arena) that
// is released when Chat returns: nothing of them outlives the ids (the model's name is a
// copy, the tokenizer's caches copy what they keep, and a failed render's error is
// formatted into a message of its own, see Tokenizing).
func (ms *Models) Chat(r *http.Request, body []byte) (*Prepared, error) {
	a := arena.Get()
	defer a.Release()
	return ms.chat(r, body, a)
}

func (ms *Models) chat(r *http.Request, body []byte, a *arena.Bytes) (*Prepared, error) {
	req, msgs, parsed, herr := decodeChat(body, a)
	if herr != nil {
		return nil, herr
	}
	if herr := validate(&req); herr != nil {
		return nil, herr
	}
	if msgs == nil {
		if msgs, herr = validateMessages(req.Messages); herr != nil {
			return nil, herr
		}
	}
	m, herr := ms.Named(*req.Model)
	if herr != nil {
		return nil, herr
	}
	c := req.chat()
	c.Decoded, c.Parsed, c.Arena = msgs, parsed, a
	meter := ms.Meter(r)
	ids, err := m.Tok.EncodeChat(meter, c)
	exact := true
	if errors.Is(err, token.ErrUnpredictable) {
		// Served all the same: the stand-in's count of the text stands in for the
		// length, and no prefix is hashed that the engine would not have.
		ids, err = token.Standin{}.EncodeChat(meter, c)
		exact = false
	}
	if err != nil {
		return nil, Tokenizing(r, err, m.Plan.Name, "rendering the chat template")
	}
	budget := req.MaxCompletionTokens
	if budget == nil {
		budget = req.MaxTokens
	}
	p, err := prepared(r, m, body, ids, budget, req.Stream)
	if err != nil {
		return nil, err
	}
	if !exact {
		p.Facts.TokenIDs = nil
	}
	if req.N != nil && *req.N > 1 {
		p.Batch = int(*req.N) // one bootstrap room per choice, as SGLang's PD router gives them
	}
	return p, nil
}

// MaxChoices bounds a chat's n: a PD request gets a bootstrap room for every choice, so n
// is an allocation. Engines set no bound of their own; 4096 is 32 times OpenAI's (128).
const MaxChoices = 4096

// validate checks the fields the router understands besides the messages (checked after
// them, by validateMessages or in decodeChat), with SGLang's sampling ranges. The message
// names the field so a client can fix its request.
func validate(req *chatRequest) *Error {
	switch {
	case req.Model == nil || *req.Model == "":
		return invalid("model: required")
	case req.MaxTokens != nil && *req.MaxTokens < 0:
		return invalid("max_tokens: must be at least 0, got %d", *req.MaxTokens)
	case req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 0:
		return invalid("max_completion_tokens: must be at least 0, got %d", *req.MaxCompletionTokens)
	case req.N != nil && *req.N < 1:
		return invalid("n: must be at least 1, got %d", *req.N)
	case req.N != nil && *req.N > MaxChoices:
		return invalid("n: at most %d, got %d: ask for fewer choices, or send several requests", MaxChoices, *req.N)
	}
	return req.sampling.validate("")
}

// validate checks the sampling ranges SGLang enforces; prefix names the object holding
// them in messages ("" or "sampling_params.").
func (sp *sampling) validate(prefix string) *Error {
	bad := func(format string, args ...any) *Error { return invalid(prefix+format, args...) }
	switch {
	case outside(sp.Temperature, 0, 2):
		return bad("temperature: must be in [0, 2], got %v", *sp.Temperature)
	case sp.TopP != nil && (*sp.TopP <= 0 || *sp.TopP > 1):
		return bad("top_p: must be in (0, 1], got %v", *sp.TopP)
	case sp.TopK != nil && *sp.TopK != -1 && *sp.TopK < 1:
		return bad("top_k: must be -1 (disabled) or at least 1, got %d", *sp.TopK)
	case outside(sp.MinP, 0, 1):
		return bad("min_p: must be in [0, 1], got %v", *sp.MinP)
	case outside(sp.FrequencyPenalty, -2, 2):
		return bad("frequency_penalty: must be in [-2, 2], got %v", *sp.FrequencyPenalty)
	case outside(sp.PresencePenalty, -2, 2):
		return bad("presence_penalty: must be in [-2, 2], got %v", *sp.PresencePenalty)
	case sp.RepetitionPenalty != nil && (*sp.RepetitionPenalty <= 0 || *sp.RepetitionPenalty > 2):
		return bad("repetition_penalty: must be in (0, 2], got %v", *sp.RepetitionPenalty)
	}
	return nil
}

// validateMessages checks the messages' keys strictly, as the rest of the body (the
// template reads them by exact name, like the engine), then what token.CheckMessages
// checks, as a 400. One decoding pass serves both and the tokenizer.
func validateMessages(raw json.RawMessage) ([]token.Message, *Error) {
	var keyErr *strictjson.KeyError
	var msgs []token.Message
	err := strictjson.Unmarshal(raw, &msgs)
	if errors.As(err, &keyErr) {
		keyErr.Path = "messages" + keyErr.Path
		return nil, invalid("%v", keyErr)
	}
	if err := token.CheckDecoded(raw, msgs, err); err != nil {
		return nil, invalid("%v", err)
	}
	return msgs, nil
}

// chat is what the model's chat template renders.
func (req *chatRequest) chat() token.Chat {
	return token.Chat{Messages: req.Messages, Tools: req.Tools, Kwargs: req.ChatTemplateKwargs,
		NoGenerationPrompt: req.AddGenerationPrompt != nil && !*req.AddGenerationPrompt,
		ReasoningEffort:    req.ReasoningEffort, ContinueFinalMessage: req.ContinueFinalMessage}
}

func outside(v *float64, lo, hi float64) bool {
	return v != nil && (*v < lo || *v > hi)
}

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
func decodeChat(body []byte, a *arena.Bytes) (req chatRequest, msgs []token.Message, parsed *token.ParsedChat, herr *Error) {
	if v, err := strictjson.ParseIn(body, &req, a); err == nil {
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
		case "reasoning_effort":
			req.ReasoningEffort = body[e.Start:e.End]
		case "continue_final_message":
			ok = setBool(&req.ContinueFinalMessage, e)
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
