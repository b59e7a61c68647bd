package request

import (
	"encoding/json"
	"math"
	"net/http"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/strictjson"
)

// completionRequest is the part of an OpenAI completion request the router routes on;
// echo, suffix, logprobs and the rest pass through untouched.
type completionRequest struct {
	Model     *string         `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	Stream    bool            `json:"stream"`
	MaxTokens *int64          `json:"max_tokens"`
	N         *int64          `json:"n"`
	sampling
}

var completionFields = withSampling(map[string]fieldSetter[completionRequest]{
	"model":      modelField(func(r *completionRequest) **string { return &r.Model }),
	"prompt":     rawField(func(r *completionRequest) *json.RawMessage { return &r.Prompt }),
	"stream":     boolField(func(r *completionRequest) *bool { return &r.Stream }),
	"max_tokens": intField(func(r *completionRequest) **int64 { return &r.MaxTokens }),
	"n":          intField(func(r *completionRequest) **int64 { return &r.N }),
}, func(r *completionRequest) *sampling { return &r.sampling })

// Completion reads POST /v1/completions. The prompt is text (tokenized with the
// model's tokenizer, special tokens added as engines do) or token ids (used as they are);
// a batch is routed as one request by its longest prompt, with a budget of max_tokens per
// prompt and per choice.
func (ms *Models) Completion(r *http.Request, body []byte) (*Prepared, error) {
	var req completionRequest
	root, herr := decodeOnePass(body, &req, completionFields)
	if herr != nil {
		return nil, herr
	}
	switch {
	case req.Model == nil || *req.Model == "":
		return nil, invalid("model: required")
	case req.MaxTokens != nil && *req.MaxTokens < 0:
		return nil, invalid("max_tokens: must be at least 0, got %d", *req.MaxTokens)
	case req.N != nil && *req.N < 1:
		return nil, invalid("n: must be at least 1, got %d", *req.N)
	}
	if herr := req.sampling.validate(""); herr != nil {
		return nil, herr
	}
	m, herr := ms.Named(*req.Model)
	if herr != nil {
		return nil, herr
	}
	in, herr := promptsOf(root, req.Prompt, "prompt")
	if herr != nil {
		return nil, herr
	}
	var budget *int64
	if req.MaxTokens != nil {
		n := int64(1)
		if req.N != nil {
			n = *req.N
		}
		budget = totalBudget(*req.MaxTokens, n, in.count())
	}
	return ms.batchPrepared(r, m, body, in, budget, req.Stream)
}

// generateRequest is the part of SGLang's native /generate request the router routes on.
// SGLang's request has no model field; the router takes one to choose among its models
// and removes it before the engine sees the body.
type generateRequest struct {
	Model          *string         `json:"model"`
	Text           json.RawMessage `json:"text"`
	InputIDs       json.RawMessage `json:"input_ids"`
	SamplingParams json.RawMessage `json:"sampling_params"`
	Stream         bool            `json:"stream"`
	ReturnLogprob  json.RawMessage `json:"return_logprob"` // a bool, or one per prompt
}

var generateFields = map[string]fieldSetter[generateRequest]{
	"model":           modelField(func(r *generateRequest) **string { return &r.Model }),
	"text":            rawField(func(r *generateRequest) *json.RawMessage { return &r.Text }),
	"input_ids":       rawField(func(r *generateRequest) *json.RawMessage { return &r.InputIDs }),
	"sampling_params": rawField(func(r *generateRequest) *json.RawMessage { return &r.SamplingParams }),
	"stream":          boolField(func(r *generateRequest) *bool { return &r.Stream }),
	"return_logprob":  rawField(func(r *generateRequest) *json.RawMessage { return &r.ReturnLogprob }),
}

// samplingParams is one SGLang sampling_params object.
type samplingParams struct {
	MaxNewTokens *int64 `json:"max_new_tokens"`
	sampling
}

// sglangMaxNewTokens is SGLang's default max_new_tokens (SamplingParams), what an engine
// generates for a prompt whose sampling_params leave it out.
const sglangMaxNewTokens = 128

// Generate reads SGLang's POST /generate: text (tokenized with the model's
// tokenizer) or input_ids, the latter used as the token facts directly, so prefix hashes
// are exact without any tokenizer. The budget is the sum of max_new_tokens over the batch.
func (ms *Models) Generate(r *http.Request, body []byte) (*Prepared, error) {
	var req generateRequest
	m, root, herr := readOptionalModel(ms, body, &req, generateFields, &req.Model)
	if herr != nil {
		return nil, herr
	}
	hasText, hasIDs := Present(req.Text), Present(req.InputIDs)
	if hasText == hasIDs {
		return nil, invalid("give exactly one of text or input_ids")
	}
	var in prompts
	if hasText {
		in, herr = promptsOf(root, req.Text, "text")
	} else {
		in, herr = promptsOf(root, req.InputIDs, "input_ids")
	}
	if herr != nil {
		return nil, herr
	}
	budget, herr := generateBudget(req.SamplingParams, in.count())
	if herr != nil {
		return nil, herr
	}
	if req.Model != nil {
		if body, herr = withoutField(body, "model"); herr != nil {
			return nil, herr
		}
	}
	p, err := ms.batchPrepared(r, m, body, in, &budget, req.Stream)
	if err == nil {
		p.ReturnLogprob = !in.batch && string(req.ReturnLogprob) == "true"
	}
	return p, err
}

// generateBudget sums max_new_tokens over n prompts: sampling_params is one object for
// every prompt, or one object per prompt.
func generateBudget(raw json.RawMessage, n int) (int64, *Error) {
	var params []samplingParams
	switch {
	case !Present(raw):
		params = []samplingParams{{}}
	case raw[0] == '[':
		if err := json.Unmarshal(raw, &params); err != nil {
			return 0, invalid("sampling_params: an object or an array of objects: %v", err)
		}
		if len(params) != n {
			return 0, invalid("sampling_params: %d objects for %d prompts: give one per prompt, or one object for all", len(params), n)
		}
	default:
		params = []samplingParams{{}}
		if err := json.Unmarshal(raw, &params[0]); err != nil {
			return 0, invalid("sampling_params: %v", err)
		}
	}
	var total int64
	for _, sp := range params {
		max := int64(sglangMaxNewTokens)
		if sp.MaxNewTokens != nil {
			if max = *sp.MaxNewTokens; max < 0 {
				return 0, invalid("sampling_params.max_new_tokens: must be at least 0, got %d", max)
			}
		}
		if herr := sp.sampling.validate("sampling_params."); herr != nil {
			return 0, herr
		}
		total = saturatingAdd(total, max)
	}
	if len(params) == 1 {
		return *totalBudget(total, 1, n), nil
	}
	return total, nil
}

// batchPrepared is prepared for a request of one or several prompts.
func (ms *Models) batchPrepared(r *http.Request, m *Model, body []byte, in prompts, budget *int64, stream bool) (*Prepared, error) {
	ids, herr := in.longest(r, ms.Meter(r), m)
	if herr != nil {
		return nil, herr
	}
	p, err := prepared(r, m, body, ids, budget, stream)
	if err != nil {
		return nil, err
	}
	if in.batch {
		p.Batch = in.count()
	}
	return p, nil
}

// totalBudget is per output tokens for each of choices choices of each of prompts
// prompts, saturating rather than overflowing: an absurd budget still fails the bucket
// check with its own message.
func totalBudget(per, choices int64, prompts int) *int64 {
	total := per
	for _, f := range []int64{choices, int64(max(prompts, 1))} {
		if f != 0 && total > math.MaxInt64/f {
			total = math.MaxInt64
			break
		}
		total *= f
	}
	return &total
}

func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// inputsRequest is the part of the embedding, rerank, score and classify requests the
// router routes on: the model and the inputs whose length is the token fact.
type inputsRequest struct {
	Model     *string         `json:"model"`
	Input     json.RawMessage `json:"input"`     // /v1/embeddings
	Query     json.RawMessage `json:"query"`     // /v1/rerank, /v1/score
	Documents json.RawMessage `json:"documents"` // /v1/rerank
	Items     json.RawMessage `json:"items"`     // /v1/score
	Text      json.RawMessage `json:"text"`      // /classify
	InputIDs  json.RawMessage `json:"input_ids"` // /classify
}

var inputsFields = map[string]fieldSetter[inputsRequest]{
	"model":     modelField(func(r *inputsRequest) **string { return &r.Model }),
	"input":     rawField(func(r *inputsRequest) *json.RawMessage { return &r.Input }),
	"query":     rawField(func(r *inputsRequest) *json.RawMessage { return &r.Query }),
	"documents": rawField(func(r *inputsRequest) *json.RawMessage { return &r.Documents }),
	"items":     rawField(func(r *inputsRequest) *json.RawMessage { return &r.Items }),
	"text":      rawField(func(r *inputsRequest) *json.RawMessage { return &r.Text }),
	"input_ids": rawField(func(r *inputsRequest) *json.RawMessage { return &r.InputIDs }),
}

// InputShape names the fields one endpoint takes its inputs from: every input is paired
// with the query, when the endpoint has one.
type InputShape struct {
	query  bool
	inputs func(*inputsRequest) (json.RawMessage, string)
}

// The input shapes of the endpoints that compute no generation.
var (
	Embeddings = InputShape{inputs: func(q *inputsRequest) (json.RawMessage, string) { return q.Input, "input" }}
	Rerank     = InputShape{query: true, inputs: func(q *inputsRequest) (json.RawMessage, string) { return q.Documents, "documents" }}
	Score      = InputShape{query: true, inputs: func(q *inputsRequest) (json.RawMessage, string) { return q.Items, "items" }}
	Classify   = InputShape{inputs: func(q *inputsRequest) (json.RawMessage, string) {
		if Present(q.InputIDs) {
			return q.InputIDs, "input_ids"
		}
		return q.Text, "text"
	}}
)

// Inputs returns the preparer of an endpoint that computes no generation
// (embeddings, rerank, score, classify): routed to the model's plain engines by its
// policy, with the longest input (plus the query it is paired with) as the token fact and
// no output budget. A prefill/decode model cannot serve them.
func (ms *Models) Inputs(shape InputShape) Preparer {
	return func(r *http.Request, body []byte) (*Prepared, error) {
		var req inputsRequest
		m, root, herr := readOptionalModel(ms, body, &req, inputsFields, &req.Model)
		if herr != nil {
			return nil, herr
		}
		if ms.pdModel(m.Plan) {
			return nil, invalid("%s serves model %q on prefill/decode engines only, which do not answer %s: send it to a model with plain engines", r.URL.Path, m.Plan.Name, r.URL.Path)
		}
		raw, field := shape.inputs(&req)
		in, herr := promptsOf(root, raw, field)
		if herr != nil {
			return nil, herr
		}
		meter := ms.Meter(r)
		ids, herr := in.longest(r, meter, m)
		if herr != nil {
			return nil, herr
		}
		if shape.query {
			q, herr := promptsOf(root, req.Query, "query")
			if herr != nil {
				return nil, herr
			}
			query, herr := q.longest(r, meter, m)
			if herr != nil {
				return nil, herr
			}
			ids = append(query[:len(query):len(query)], ids...)
		}
		zero := int64(0)
		return prepared(r, m, body, ids, &zero, false)
	}
}

// readOptionalModel decodes a JSON body into req in one pass (decodeOnePass) and
// returns the model its *model field names, or the only model when the field is absent,
// as SGLang's single-model endpoints allow, with the body's parse.
func readOptionalModel[T any](ms *Models, body []byte, req *T, fields map[string]fieldSetter[T], model **string) (*Model, *strictjson.Value, *Error) {
	root, herr := decodeOnePass(body, req, fields)
	if herr != nil {
		return nil, nil, herr
	}
	name := ""
	if *model != nil {
		name = **model
	}
	m, herr := ms.Named(name)
	return m, root, herr
}

// pdModel reports whether the model is served by prefill/decode engines: a model's
// engines are all plain or all PD.
func (ms *Models) pdModel(m *plan.Model) bool {
	for _, e := range ms.plan.Engines {
		if e.Model == m.Name {
			return e.Role != plan.RolePlain
		}
	}
	return false
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
