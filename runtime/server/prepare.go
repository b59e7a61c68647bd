package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/token"
)

// maxBodyBytes is the request body limit, as in SGLang's router.
const maxBodyBytes = 32 << 20

// chatRequest is the part of an OpenAI chat completion request the router validates and
// routes on. The body itself is forwarded as the client sent it.
type chatRequest struct {
	Model               *string         `json:"model"`
	Messages            []token.Message `json:"messages"`
	Stream              bool            `json:"stream"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int64          `json:"top_k"`
	MinP                *float64        `json:"min_p"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	RepetitionPenalty   *float64        `json:"repetition_penalty"`
	N                   *int64          `json:"n"`
}

// prepared is a validated request with its routing facts, computed once.
type prepared struct {
	body     []byte
	model    *plan.Model
	resolver *bucket.Resolver
	facts    policy.Facts
	stream   bool
}

// prepare reads and validates a chat request and extracts its routing facts: the model's
// resolver, the input token count and ids, the expected peak, and the session and routing
// keys from the model's configured headers.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request) (*prepared, *httpError) {
	body, herr := s.readBody(w, r)
	if herr != nil {
		return nil, herr
	}
	var req chatRequest
	if herr := decodeBody(body, &req); herr != nil {
		return nil, herr
	}
	if herr := validate(&req); herr != nil {
		return nil, herr
	}
	m := s.models[*req.Model]
	if m == nil {
		return nil, &httpError{status: http.StatusNotFound, code: codeModelNotFound, model: *req.Model,
			msg: fmt.Sprintf("model %q is not served by this router (served: %s)", *req.Model, s.modelList)}
	}
	ids := token.EncodeChat(req.Messages)
	p := &prepared{body: body, model: m.plan, resolver: m.resolver, stream: req.Stream}
	p.facts = policy.Facts{
		Model:       m.plan.Name,
		InputTokens: int64(len(ids)),
		TokenIDs:    ids,
		SessionKey:  r.Header.Get(m.plan.SessionIDHeader),
		RoutingKey:  r.Header.Get(m.plan.RoutingKeyHeader),
	}
	budget := req.MaxCompletionTokens
	if budget == nil {
		budget = req.MaxTokens
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

// validate checks the fields the router understands, with SGLang's sampling ranges. The
// message names the field so a client can fix its request.
func validate(req *chatRequest) *httpError {
	bad := func(format string, args ...any) *httpError {
		return &httpError{status: http.StatusBadRequest, code: codeInvalidRequest, msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case req.Model == nil || *req.Model == "":
		return bad("model: required")
	case len(req.Messages) == 0:
		return bad("messages: at least one message is required")
	case req.MaxTokens != nil && *req.MaxTokens < 0:
		return bad("max_tokens: must be at least 0, got %d", *req.MaxTokens)
	case req.MaxCompletionTokens != nil && *req.MaxCompletionTokens < 0:
		return bad("max_completion_tokens: must be at least 0, got %d", *req.MaxCompletionTokens)
	case outside(req.Temperature, 0, 2):
		return bad("temperature: must be in [0, 2], got %v", *req.Temperature)
	case req.TopP != nil && (*req.TopP <= 0 || *req.TopP > 1):
		return bad("top_p: must be in (0, 1], got %v", *req.TopP)
	case req.TopK != nil && *req.TopK != -1 && *req.TopK < 1:
		return bad("top_k: must be -1 (disabled) or at least 1, got %d", *req.TopK)
	case outside(req.MinP, 0, 1):
		return bad("min_p: must be in [0, 1], got %v", *req.MinP)
	case outside(req.FrequencyPenalty, -2, 2):
		return bad("frequency_penalty: must be in [-2, 2], got %v", *req.FrequencyPenalty)
	case outside(req.PresencePenalty, -2, 2):
		return bad("presence_penalty: must be in [-2, 2], got %v", *req.PresencePenalty)
	case req.RepetitionPenalty != nil && (*req.RepetitionPenalty <= 0 || *req.RepetitionPenalty > 2):
		return bad("repetition_penalty: must be in (0, 2], got %v", *req.RepetitionPenalty)
	case req.N != nil && *req.N < 1:
		return bad("n: must be at least 1, got %d", *req.N)
	}
	for i, m := range req.Messages {
		if m.Role == "" {
			return bad("messages[%d].role: required", i)
		}
	}
	return nil
}

func outside(v *float64, lo, hi float64) bool {
	return v != nil && (*v < lo || *v > hi)
}
