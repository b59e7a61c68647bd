package request

import (
	"encoding/json"
	"errors"
	"net/http"

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
	Stream              bool            `json:"stream"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	N                   *int64          `json:"n"`
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
func (ms *Models) Chat(r *http.Request, body []byte) (*Prepared, error) {
	req, msgs, parsed, herr := decodeChat(body)
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
	c.Decoded, c.Parsed = msgs, parsed
	ids, err := m.Tok.EncodeChat(c)
	exact := true
	switch {
	case errors.Is(err, token.ErrUnpredictable):
		// Served all the same: the stand-in's count of the text stands in for the
		// length, and no prefix is hashed that the engine would not have.
		ids, _ = token.Standin{}.EncodeChat(c)
		exact = false
	case err != nil:
		return nil, &Error{Kind: Invalid, Model: m.Plan.Name, Msg: "rendering the chat template: " + err.Error()}
	}
	budget := req.MaxCompletionTokens
	if budget == nil {
		budget = req.MaxTokens
	}
	p, err := prepared(r, m, body, ids, budget, req.Stream)
	if err == nil && !exact {
		p.Facts.TokenIDs = nil
	}
	return p, err
}

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
		NoGenerationPrompt: req.AddGenerationPrompt != nil && !*req.AddGenerationPrompt}
}

func outside(v *float64, lo, hi float64) bool {
	return v != nil && (*v < lo || *v > hi)
}
