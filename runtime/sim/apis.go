package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/routerkit/router/runtime/plan"
)

// completionRequest is an OpenAI completion request as the simulator reads it.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	MaxTokens     *int            `json:"max_tokens"`
	N             *int            `json:"n"`
	bootstrap
}

// generateRequest is SGLang's native /generate request as the simulator reads it.
type generateRequest struct {
	Text           json.RawMessage `json:"text"`
	InputIDs       json.RawMessage `json:"input_ids"`
	SamplingParams json.RawMessage `json:"sampling_params"`
	Stream         bool            `json:"stream"`
	ReturnLogprob  bool            `json:"return_logprob"`
	bootstrap
}

// bootstrap holds a request's disaggregation fields, scalars for one prompt or arrays for
// a batch; a batch runs as one request here, in the first prompt's room.
type bootstrap struct {
	Host             firstOf[string] `json:"bootstrap_host"`
	Port             firstOf[int]    `json:"bootstrap_port"`
	Room             firstOf[uint64] `json:"bootstrap_room"`
	DataParallelRank *int            `json:"data_parallel_rank"`
}

// firstOf decodes a value, or the first element of an array of values.
type firstOf[T any] struct{ v *T }

func (f *firstOf[T]) UnmarshalJSON(data []byte) error {
	var one T
	if err := json.Unmarshal(data, &one); err == nil {
		f.v = &one
		return nil
	}
	var many []T
	if err := json.Unmarshal(data, &many); err != nil {
		return err
	}
	if len(many) > 0 {
		f.v = &many[0]
	}
	return nil
}

// request fills the common form of a generation request from decoded fields.
func (b *bootstrap) request(a api, model string, stream bool) *chatRequest {
	return &chatRequest{
		api: a, Model: model, Stream: stream, BootstrapHost: b.Host.v, BootstrapPort: b.Port.v, BootstrapRoom: b.Room.v,
		DataParallelRank: b.DataParallelRank,
	}
}

func (e *Engine) handleCompletions(w http.ResponseWriter, r *http.Request) {
	e.generate(w, r, e.decodeCompletion)
}

func (e *Engine) decodeCompletion(w http.ResponseWriter, r *http.Request) (*chatRequest, *badRequest) {
	var in completionRequest
	if bad := readJSON(w, r, &in); bad != nil {
		return nil, bad
	}
	req := in.request(apiCompletions, in.Model, in.Stream)
	req.StreamOptions, req.MaxTokens, req.N = in.StreamOptions, in.MaxTokens, in.N
	if bad := e.readPrompts(req, in.Prompt, "prompt"); bad != nil {
		return req, bad
	}
	return req, e.validateChat(req)
}

func (e *Engine) handleGenerate(w http.ResponseWriter, r *http.Request) {
	e.generate(w, r, e.decodeGenerate)
}

func (e *Engine) decodeGenerate(w http.ResponseWriter, r *http.Request) (*chatRequest, *badRequest) {
	var in generateRequest
	if bad := readJSON(w, r, &in); bad != nil {
		return nil, bad
	}
	req := in.request(apiGenerate, "", in.Stream)
	req.returnLogprob = in.ReturnLogprob
	var params struct {
		MaxNewTokens *int `json:"max_new_tokens"`
	}
	if len(in.SamplingParams) > 0 {
		var all firstOf[json.RawMessage]
		if err := json.Unmarshal(in.SamplingParams, &all); err != nil || (all.v != nil && json.Unmarshal(*all.v, &params) != nil) {
			return req, invalid("Invalid sampling_params.")
		}
	}
	maxNew := 128 // SGLang's default max_new_tokens
	if params.MaxNewTokens != nil {
		maxNew = *params.MaxNewTokens
	}
	req.MaxTokens = &maxNew
	raw, field := in.Text, "text"
	if len(in.InputIDs) > 0 {
		raw, field = in.InputIDs, "input_ids"
	}
	if bad := e.readPrompts(req, raw, field); bad != nil {
		return req, bad
	}
	return req, e.validateChat(req)
}

// encode returns the ids of a text prompt with the tokenizer's special tokens, as an
// engine computes them. The simulator does not bound its tokenization (a nil meter),
// and the tokenizers fail only on a meter's bounds.
func (e *Engine) encode(text string) []uint32 {
	ids, _ := e.spec.Tokenizer.Encode(nil, text, true)
	return ids
}

// readPrompts sets the request's input ids from a prompt given as text, token ids, or a
// batch of either; a batch is simulated as one request over its longest prompt.
func (e *Engine) readPrompts(req *chatRequest, raw json.RawMessage, field string) *badRequest {
	var text string
	var ids []uint32
	var texts []string
	var batch [][]uint32
	switch {
	case json.Unmarshal(raw, &text) == nil:
		req.promptIDs = e.encode(text)
	case json.Unmarshal(raw, &ids) == nil && len(ids) > 0:
		req.promptIDs = ids
	case json.Unmarshal(raw, &texts) == nil && len(texts) > 0:
		req.prompts = len(texts)
		for _, t := range texts {
			if p := e.encode(t); len(p) > len(req.promptIDs) {
				req.promptIDs = p
			}
		}
	case json.Unmarshal(raw, &batch) == nil && len(batch) > 0:
		req.prompts = len(batch)
		for _, p := range batch {
			if len(p) > len(req.promptIDs) {
				req.promptIDs = p
			}
		}
	default:
		return invalid("Invalid %s: expected a string, a list of strings, a list of token ids or a list of such lists.", field)
	}
	if len(req.promptIDs) == 0 {
		return invalid("The %s is empty.", field)
	}
	return nil
}

// readJSON decodes a request body of at most maxBodyBytes.
func readJSON(w http.ResponseWriter, r *http.Request, v any) *badRequest {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(v); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &badRequest{status: http.StatusRequestEntityTooLarge, msg: "Request body too large."}
		}
		return invalid("Invalid request body: %v", err)
	}
	return nil
}

// answer is the body of a finished non-streaming request in its API's shape.
// params is the vLLM KV hand-over a remote-decode prefill returns with a chat answer.
func (e *Engine) answer(j *job, u usage, text string, params *kvTransferParams) any {
	switch j.req.api {
	case apiCompletions:
		choices := make([]completionChoice, max(j.req.prompts, 1))
		for i := range choices {
			choices[i] = completionChoice{Index: i, Text: text, FinishReason: &j.reason}
		}
		return textCompletion{ID: j.id, Object: "text_completion", Created: j.created, Model: e.spec.Model, Choices: choices, Usage: &u}
	case apiGenerate:
		out := generated{Text: text, MetaInfo: e.metaInfo(j, u, &j.reason)}
		if j.req.prompts == 0 {
			return out
		}
		batch := make([]generated, j.req.prompts)
		for i := range batch {
			batch[i] = out
		}
		return batch
	}
	choices := make([]choice, 1, 2)
	if n := j.req.N; n != nil && *n > 1 {
		choices = make([]choice, *n) // at most maxChoices
	}
	for i := range choices {
		choices[i] = choice{Index: i, Message: message{Role: "assistant", Content: text}, FinishReason: j.reason}
	}
	return completion{
		ID: j.id, Object: "chat.completion", Created: j.created, Model: e.spec.Model,
		Choices: choices, Usage: u, KVTransferParams: params,
	}
}

// streamToken is the event of one generated token: its text for the OpenAI APIs, the
// whole text so far for /generate, as SGLang streams it.
func (e *Engine) streamToken(j *job, token, sofar string, n int) any {
	switch j.req.api {
	case apiCompletions:
		return textCompletion{ID: j.id, Object: "text_completion", Created: j.created, Model: e.spec.Model,
			Choices: []completionChoice{{Text: token}}}
	case apiGenerate:
		return generated{Text: sofar, MetaInfo: e.metaInfo(j, usage{PromptTokens: j.inputs, CompletionTokens: n}, nil)}
	}
	return e.chatChunk(j, chunk{Choices: []chunkChoice{{Delta: delta{Content: &token}}}})
}

// streamEnd is the events that end a stream before [DONE].
func (e *Engine) streamEnd(j *job, u usage, text string) []any {
	usageAsked := j.req.StreamOptions != nil && j.req.StreamOptions.IncludeUsage
	switch j.req.api {
	case apiCompletions:
		out := []any{textCompletion{ID: j.id, Object: "text_completion", Created: j.created, Model: e.spec.Model,
			Choices: []completionChoice{{FinishReason: &j.reason}}}}
		if usageAsked {
			out = append(out, textCompletion{ID: j.id, Object: "text_completion", Created: j.created, Model: e.spec.Model,
				Choices: []completionChoice{}, Usage: &u})
		}
		return out
	case apiGenerate:
		return []any{generated{Text: text, MetaInfo: e.metaInfo(j, u, &j.reason)}}
	}
	out := []any{e.chatChunk(j, chunk{Choices: []chunkChoice{{Delta: delta{}, FinishReason: &j.reason}}})}
	if usageAsked {
		out = append(out, e.chatChunk(j, chunk{Choices: []chunkChoice{}, Usage: &u}))
	}
	return out
}

type textCompletion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

type completionChoice struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// generated is one answer of SGLang's /generate.
type generated struct {
	Text     string   `json:"text"`
	MetaInfo metaInfo `json:"meta_info"`
}

type metaInfo struct {
	ID               string        `json:"id"`
	FinishReason     *finishReason `json:"finish_reason"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	CachedTokens     int           `json:"cached_tokens"`
	// InputTokenLogprobs is SGLang's [logprob, token id, text] per prompt token, when
	// return_logprob asked for it (see inputLogprobs).
	InputTokenLogprobs json.RawMessage `json:"input_token_logprobs,omitempty"`
}

// finishReason is SGLang's: {"type": "length", "length": N} or {"type": "stop"}.
type finishReason struct {
	Type   string `json:"type"`
	Length int    `json:"length,omitempty"`
}

func (e *Engine) metaInfo(j *job, u usage, reason *string) metaInfo {
	m := metaInfo{ID: j.id, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	if j.req.returnLogprob {
		m.InputTokenLogprobs = e.inputLogprobs(j.req.promptIDs)
	}
	if u.PromptTokensDetails != nil {
		m.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if reason != nil {
		m.FinishReason = &finishReason{Type: *reason}
		if *reason == "length" {
			m.FinishReason.Length = u.CompletionTokens
		}
	}
	return m
}

func (e *Engine) handleModelInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSONBody(w, map[string]any{"model_path": e.spec.Model, "tokenizer_path": e.spec.Model, "is_generation": true,
		"preferred_sampling_params": nil, "weight_version": "default"})
}

// writeJSONBody answers 200 with v as JSON.
func writeJSONBody(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("Encoding the answer: %v.", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// inputLogprobs is a prompt's input_token_logprobs as SGLang writes them: the first token
// has no logprob (null), every other a made-up one derived from its id, and no text
// (return_text_in_logprobs is not simulated). An SGLang decode engine of a PD pair ran no
// prefill and answers an empty list: a router merges the prefill engine's in front, as
// SGLang's does.
func (e *Engine) inputLogprobs(ids []uint32) json.RawMessage {
	if e.spec.Role == plan.RoleDecode && e.spec.Kind != plan.KindVLLM {
		return json.RawMessage("[]")
	}
	out := make([]byte, 0, 16*len(ids)+2)
	out = append(out, '[')
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		lp := "null"
		if i > 0 {
			lp = strconv.FormatFloat(-float64(id%97)/16, 'g', -1, 64)
		}
		out = fmt.Appendf(out, "[%s,%d,null]", lp, id)
	}
	return append(out, ']')
}
