package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// maxBodyBytes is the request body limit, as in SGLang's router.
const maxBodyBytes = 32 << 20

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

// prepared is a validated request with its routing facts, computed once.
type prepared struct {
	body     []byte
	model    *plan.Model
	resolver *bucket.Resolver
	facts    policy.Facts
	// pass is the request's selection pass, kept here so that it costs no allocation of
	// its own.
	pass   policy.Pass
	stream bool
	// batch is the number of prompts of a batch request, routed as one; 0 for a single
	// prompt. PD bootstrap fields become arrays of this length, as engines expect.
	batch int
}

// preparer reads and validates one endpoint's request shape into routing facts.
type preparer func(w http.ResponseWriter, r *http.Request) (*prepared, *httpError)

// prepareChat reads and validates a chat request and extracts its routing facts: the
// model's resolver, the input token count and ids, the expected peak, and the session and
// routing keys from the model's configured headers.
func (s *Server) prepareChat(w http.ResponseWriter, r *http.Request) (*prepared, *httpError) {
	body, herr := s.readBody(w, r)
	if herr != nil {
		return nil, herr
	}
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
	m, herr := s.modelNamed(*req.Model)
	if herr != nil {
		return nil, herr
	}
	c := req.chat()
	c.Decoded, c.Parsed = msgs, parsed
	meter := s.meter(r)
	ids, err := m.Tok.EncodeChat(meter, c)
	exact := true
	if errors.Is(err, token.ErrUnpredictable) {
		// Served all the same: the stand-in's count of the text stands in for the
		// length, and no prefix is hashed that the engine would not have.
		ids, err = token.Standin{}.EncodeChat(meter, c)
		exact = false
	}
	if err != nil {
		herr := tokenizeFailed(r, err, "rendering the chat template")
		herr.model = m.Plan.Name
		return nil, herr
	}
	budget := req.MaxCompletionTokens
	if budget == nil {
		budget = req.MaxTokens
	}
	p, herr := s.prepared(r, m, body, ids, budget, req.Stream)
	if herr == nil && !exact {
		p.facts.TokenIDs = nil
	}
	return p, herr
}

// firstValue is Header.Get for a key already in canonical form.
func firstValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// prepared builds the routing facts of a request for model m from its input ids and
// output budget (nil: unknown), with the session and routing keys from the model's
// configured headers.
func (s *Server) prepared(r *http.Request, m *served, body []byte, ids []uint32, budget *int64, stream bool) (*prepared, *httpError) {
	p := &prepared{body: body, model: m.Plan, resolver: m.Resolver, stream: stream}
	p.facts = policy.Facts{
		Model:       m.Plan.Name,
		InputTokens: int64(len(ids)),
		TokenIDs:    ids,
		SessionKey:  firstValue(r.Header, m.sessionHeader),
		RoutingKey:  firstValue(r.Header, m.routingHeader),
	}
	if budget != nil {
		peak, err := bucket.ExpectedPeak(p.facts.InputTokens, *budget)
		if err != nil {
			var be *bucket.Error
			errors.As(err, &be)
			return nil, &httpError{status: be.Status(), code: be.Code(), msg: be.Error()}
		}
		p.facts.ExpectedPeak, p.facts.PeakKnown = peak, true
	}
	return p, nil
}

// readRequest reads a client's request body (see readBody) and decodes it strictly into v.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request, v any) ([]byte, *httpError) {
	body, herr := s.readBody(w, r)
	if herr != nil {
		return nil, herr
	}
	if herr := decodeBody(body, v); herr != nil {
		return nil, herr
	}
	return body, nil
}

// validate checks the fields the router understands besides the messages (checked after
// them, by validateMessages or in decodeChat), with SGLang's sampling ranges. The message
// names the field so a client can fix its request.
func validate(req *chatRequest) *httpError {
	switch {
	case req.Model == nil || *req.Model == "":
		return badRequest("model: required")
	case req.MaxTokens != nil && *req.MaxTokens < 0:
		return badRequest("max_tokens: must be at least 0, got %d", *req.MaxTokens)
	case req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 0:
		return badRequest("max_completion_tokens: must be at least 0, got %d", *req.MaxCompletionTokens)
	case req.N != nil && *req.N < 1:
		return badRequest("n: must be at least 1, got %d", *req.N)
	}
	return req.sampling.validate("")
}

// validate checks the sampling ranges SGLang enforces; prefix names the object holding
// them in messages ("" or "sampling_params.").
func (sp *sampling) validate(prefix string) *httpError {
	bad := func(format string, args ...any) *httpError { return badRequest(prefix+format, args...) }
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
func validateMessages(raw json.RawMessage) ([]token.Message, *httpError) {
	var keyErr *strictjson.KeyError
	var msgs []token.Message
	err := strictjson.Unmarshal(raw, &msgs)
	if errors.As(err, &keyErr) {
		keyErr.Path = "messages" + keyErr.Path
		return nil, badRequest("%v", keyErr)
	}
	if err := token.CheckDecoded(raw, msgs, err); err != nil {
		return nil, badRequest("%v", err)
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
