// Package request reads the requests the router routes: it decodes each endpoint's body
// shape strictly, checks what the router understands of it, finds the model, tokenizes
// the prompt and computes the routing facts, once per request. It knows nothing of
// dispatch or of HTTP statuses: what is wrong with a request is an *Error of a Kind, which
// the HTTP edge answers.
package request

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/selection"
	"github.com/routerkit/router/runtime/slo"
)

// MaxBodyBytes is the request body limit, as in SGLang's router.
const MaxBodyBytes = 32 << 20

// Kind is what is wrong with a request.
type Kind int

const (
	// Invalid: a field breaks a rule; the message names the field and the fix.
	Invalid Kind = iota
	// InvalidJSON: the body is not a JSON object.
	InvalidJSON
	// UnknownModel: the request names a model the router does not serve.
	UnknownModel
	// NoTokenizer: the model's tokenizer cannot do what was asked (decode ids).
	NoTokenizer
	// InvalidTarget: an SLO target header the model's preferences read is not a
	// positive number.
	InvalidTarget
	// Internal: the router failed on a valid request.
	Internal
	// TooLarge: the text to tokenize is over limits.max_tokenize_bytes.
	TooLarge
	// Ended: the request's context ended while it was read (Cause says why: the client
	// left, or the router's hard stop).
	Ended
)

// Error is a request the router refuses, and why.
type Error struct {
	Kind Kind
	Msg  string
	// Model is the requested model when the request named one.
	Model string
	// Cause is the cause of an Ended request's context.
	Cause error
}

func (e *Error) Error() string { return e.Msg }

// invalid is an Invalid error whose message names the field to fix.
func invalid(format string, args ...any) *Error {
	return &Error{Kind: Invalid, Msg: fmt.Sprintf(format, args...)}
}

// Model is a model the router serves: its selection stack, and the names of the
// headers that carry a request's session and routing keys in canonical form, so that a
// request's header map is read with them directly (Header.Get would canonicalize the
// lowercase default names anew, an allocation each, on every request).
type Model struct {
	*selection.Model
	sessionHeader, routingHeader string
}

// Models are the models one plan serves, by name, over the plan's engines.
type Models struct {
	plan   *plan.Plan
	byName map[string]*Model
	names  string
}

// NewModels builds the selection stack of every model of p over the engines in reg and
// the policies' shared state deps.
func NewModels(p *plan.Plan, reg *engine.Registry, deps policy.Deps) (*Models, error) {
	ms := &Models{plan: p, byName: map[string]*Model{}}
	names := make([]string, 0, len(p.Models))
	for i := range p.Models {
		m := &p.Models[i]
		sm, err := selection.NewModel(m, reg, deps)
		if err != nil {
			return nil, err
		}
		ms.byName[m.Name] = &Model{Model: sm,
			sessionHeader: http.CanonicalHeaderKey(m.SessionIDHeader), routingHeader: http.CanonicalHeaderKey(m.RoutingKeyHeader)}
		names = append(names, m.Name)
	}
	ms.names = strings.Join(names, ", ")
	return ms, nil
}

// Over returns the same models over p's engines, for a membership change that changed
// only the engines.
func (ms *Models) Over(p *plan.Plan) *Models {
	out := *ms
	out.plan = p
	return &out
}

// Get returns the model of the name, or nil.
func (ms *Models) Get(name string) *Model { return ms.byName[name] }

// All returns the models by name; it must not be modified.
func (ms *Models) All() map[string]*Model { return ms.byName }

// Named is the named model, or the only one when the request names none, as an engine
// serving one model answers.
func (ms *Models) Named(name string) (*Model, *Error) {
	if name == "" {
		if len(ms.byName) == 1 {
			for _, m := range ms.byName {
				return m, nil
			}
		}
		return nil, invalid("model: required, one of %s", ms.names)
	}
	if m := ms.byName[name]; m != nil {
		return m, nil
	}
	return nil, ms.Unknown(name)
}

// Unknown is the error for a model the router does not serve.
func (ms *Models) Unknown(name string) *Error {
	return &Error{Kind: UnknownModel, Model: name,
		Msg: fmt.Sprintf("model %q is not served by this router (served: %s)", name, ms.names)}
}

// Prepared is a validated request with its routing facts, computed once.
type Prepared struct {
	Body     []byte
	Model    *plan.Model
	Resolver *bucket.Resolver
	Facts    policy.Facts
	// Pass is the request's selection pass, kept here so that it costs no allocation of
	// its own.
	Pass   policy.Pass
	Stream bool
	// Batch is the number of prompts of a batch request, routed as one, or a chat's n
	// above 1; 0 otherwise. PD bootstrap fields become arrays of this length, as SGLang's
	// PD router sends them (get_generate_batch_size, get_completion_batch_size,
	// get_chat_batch_size in sgl-router's pd_router.rs).
	Batch int
	// ReturnLogprob is a single-prompt /generate's return_logprob: a PD answer's
	// meta_info.input_token_logprobs get the prefill engine's in front of the decode
	// engine's, as SGLang's PD router merges them. (Its merge, like this one, leaves a
	// batch's answer, a JSON array, as it is.)
	ReturnLogprob bool
}

// Preparer reads and validates one endpoint's request shape, the body already read,
// into routing facts. Its errors are *Error, or the *bucket.Error of an output budget
// that overflows.
type Preparer func(r *http.Request, body []byte) (*Prepared, error)

// The SLO target headers in canonical form, for firstValue.
var (
	ttftHeader = http.CanonicalHeaderKey(slo.TTFTHeader)
	tpsHeader  = http.CanonicalHeaderKey(slo.TPSHeader)
)

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
func prepared(r *http.Request, m *Model, body []byte, ids []uint32, budget *int64, stream bool) (*Prepared, error) {
	p := &Prepared{Body: body, Model: m.Plan, Resolver: m.Resolver, Stream: stream}
	p.Facts = policy.Facts{
		Model:       m.Plan.Name,
		InputTokens: int64(len(ids)),
		TokenIDs:    ids,
		SessionKey:  firstValue(r.Header, m.sessionHeader),
		RoutingKey:  firstValue(r.Header, m.routingHeader),
	}
	if m.Plan.SLO.Enabled() {
		t, err := slo.ParseTargets(firstValue(r.Header, ttftHeader), firstValue(r.Header, tpsHeader), m.Plan.SLO)
		if err != nil {
			return nil, &Error{Kind: InvalidTarget, Msg: err.Error(), Model: m.Plan.Name}
		}
		p.Facts.SLO = t
	}
	if budget != nil {
		peak, err := bucket.ExpectedPeak(p.Facts.InputTokens, *budget)
		if err != nil {
			return nil, err
		}
		p.Facts.ExpectedPeak, p.Facts.PeakKnown = peak, true
	}
	return p, nil
}
