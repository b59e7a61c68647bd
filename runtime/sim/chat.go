package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
)

// maxBodyBytes matches the router's request size limit.
const maxBodyBytes = 32 << 20

// chatRequest holds the fields of an OpenAI chat completion request the simulator acts on,
// plus SGLang's disaggregation and data-parallel extensions. Other fields are ignored.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            messages        `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	ReasoningEffort     json.RawMessage `json:"reasoning_effort"`
	ContinueFinal       bool            `json:"continue_final_message"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MinTokens           *int            `json:"min_tokens"`
	N                   *int            `json:"n"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	// The bootstrap fields and the rank are read through the embedded bootstrap, which
	// takes SGLang's arrays as well as scalars (see readChat).
	BootstrapHost    *string `json:"-"`
	BootstrapPort    *int    `json:"-"`
	BootstrapRoom    *uint64 `json:"-"`
	DataParallelRank *int    `json:"-"`
	bootstrap
	// KVTransferParams is vLLM's disaggregation field, read by vLLM-kind engines only.
	KVTransferParams *kvTransferParams `json:"kv_transfer_params"`

	// api is the API the request came by, which shapes the answer; promptIDs are the
	// input ids of a completion or generate request (a chat's come from its template),
	// and prompts how many prompts a batch had (0 for a single prompt).
	api       api
	promptIDs []uint32
	prompts   int
	// returnLogprob is /generate's return_logprob: the answer's meta_info carries the
	// prompt's input_token_logprobs.
	returnLogprob bool
}

// api is the API a generation request came by.
type api int

const (
	apiChat api = iota
	apiCompletions
	apiGenerate
)

// messages keeps the client's JSON for the chat template beside the decoded list the
// simulator validates.
type messages struct {
	raw  json.RawMessage
	list []token.Message
}

func (m *messages) UnmarshalJSON(data []byte) error {
	m.raw = append(m.raw[:0], data...)
	return json.Unmarshal(data, &m.list)
}

// chat is what the engine's chat template renders.
func (req *chatRequest) chat() token.Chat {
	return token.Chat{Messages: req.Messages.raw, Tools: req.Tools, Kwargs: req.ChatTemplateKwargs,
		NoGenerationPrompt: req.AddGenerationPrompt != nil && !*req.AddGenerationPrompt,
		ReasoningEffort:    req.ReasoningEffort, ContinueFinalMessage: req.ContinueFinal}
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// badRequest is a client error answered with its status and SGLang's own wording (which
// is why its messages are capitalized and end with a full stop): an HTTP answer, not a
// Go error.
type badRequest struct {
	status int
	msg    string
}

func invalid(format string, args ...any) *badRequest {
	return &badRequest{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// maxChoices bounds n, which the simulator answers with as many copies of one choice:
// OpenAI's own limit.
const maxChoices = 128

var validRoles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "developer": true, "function": true}

// decodeChat reads and validates a request body the way SGLang's OpenAI server does. A
// request that decodes but is invalid comes back with its error, so that a prefill engine
// can still report the failure to its decode peer.
func (e *Engine) decodeChat(w http.ResponseWriter, r *http.Request) (*chatRequest, *badRequest) {
	req, bad := e.readChat(w, r)
	if bad == nil {
		bad = e.validateChat(req)
	}
	return req, bad
}

func (e *Engine) readChat(w http.ResponseWriter, r *http.Request) (*chatRequest, *badRequest) {
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&req); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &badRequest{status: http.StatusRequestEntityTooLarge, msg: "Request body too large."}
		}
		return nil, invalid("Invalid request body: %v", err)
	}
	req.BootstrapHost, req.BootstrapPort, req.BootstrapRoom, req.DataParallelRank = req.Host.v, req.Port.v, req.Room.v, req.bootstrap.DataParallelRank
	return &req, nil
}

func (e *Engine) validateChat(req *chatRequest) *badRequest {
	switch {
	case req.Model != "" && req.Model != e.spec.Model:
		return &badRequest{status: http.StatusNotFound, msg: fmt.Sprintf("The model `%s` does not exist.", req.Model)}
	case req.api == apiChat && len(req.Messages.list) == 0:
		return invalid("Messages cannot be empty.")
	case req.StreamOptions != nil && !req.Stream:
		return invalid("Stream options can only be defined when `stream=True`.")
	case req.N != nil && *req.N < 1:
		return invalid("n must be at least 1, got %d.", *req.N)
	case req.N != nil && *req.N > 1 && (req.api != apiChat || req.Stream):
		// A simulator's limit, not an engine's: n choices are answered (as copies of one)
		// on a non-streamed chat only.
		return invalid("The simulator answers n above 1 on non-streamed chat completions only, got n=%d.", *req.N)
	case req.N != nil && *req.N > maxChoices:
		return invalid("The simulator answers at most %d choices, got n=%d.", maxChoices, *req.N)
	case req.Temperature != nil && *req.Temperature < 0:
		return invalid("temperature must be non-negative, got %v.", *req.Temperature)
	case req.TopP != nil && (*req.TopP <= 0 || *req.TopP > 1):
		return invalid("top_p must be in (0, 1], got %v.", *req.TopP)
	}
	for _, m := range req.Messages.list {
		if !validRoles[m.Role] {
			return invalid("Invalid message role %q.", m.Role)
		}
	}
	if n := req.maxNewTokens(); n != nil && *n < 1 {
		return invalid("max_tokens must be at least 1, got %d.", *n)
	}
	if n, least := req.maxNewTokens(), req.MinTokens; n != nil && least != nil && *least > *n {
		// vLLM's SamplingParams._verify_args and SGLang's SamplingParams.verify refuse it
		// alike, each in its own words.
		if e.spec.Kind == plan.KindVLLM {
			return invalid("min_tokens must be less than or equal to max_tokens=%d, got %d.", *n, *least)
		}
		return invalid("min_new_tokens must be in [0, max_new_tokens(%d)], got %d.", *n, *least)
	}
	if e.spec.Role != plan.RolePlain && e.spec.Kind != plan.KindVLLM {
		switch {
		case req.BootstrapRoom == nil:
			return invalid("Disaggregated request received without bootstrap room id")
		case req.BootstrapHost == nil || *req.BootstrapHost == "":
			return invalid("Disaggregated request received without bootstrap host")
		case req.BootstrapPort == nil:
			return invalid("Disaggregated request received without bootstrap port")
		}
	}
	return nil
}

// maxNewTokens is max_completion_tokens, or the older max_tokens, or nil.
func (req *chatRequest) maxNewTokens() *int {
	if req.MaxCompletionTokens != nil {
		return req.MaxCompletionTokens
	}
	return req.MaxTokens
}

// hasBootstrap reports whether the request names a bootstrap room completely.
func (req *chatRequest) hasBootstrap() bool {
	return req != nil && req.BootstrapRoom != nil && req.BootstrapHost != nil && req.BootstrapPort != nil
}

// roomKey returns the request's bootstrap room; only valid when hasBootstrap.
func (req *chatRequest) roomKey() roomKey {
	return roomKey{addr: bootstrapAddr(*req.BootstrapHost, *req.BootstrapPort), room: *req.BootstrapRoom}
}

// outputBudget returns how many tokens the request generates and its finish reason. The
// simulated model stops by itself after Config.OutputTokens; max_tokens and the context
// length cut it shorter. A prefill engine generates the first token only.
func (e *Engine) outputBudget(req *chatRequest, inputTokens int) (int, string, *badRequest) {
	ctxLen := e.spec.Config.ContextLength
	if inputTokens >= ctxLen {
		return 0, "", invalid("The input (%d tokens) is longer than the model's context length (%d tokens).", inputTokens, ctxLen)
	}
	n, reason := e.spec.Config.OutputTokens, "stop"
	if limit := req.maxNewTokens(); limit != nil {
		if inputTokens+*limit > ctxLen {
			return 0, "", invalid("Requested token count exceeds the model's maximum context length of %d tokens. "+
				"You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. "+
				"Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
				ctxLen, inputTokens+*limit, inputTokens, *limit)
		}
		if *limit <= n {
			n, reason = *limit, "length"
		}
	}
	if n > ctxLen-inputTokens {
		n, reason = ctxLen-inputTokens, "length"
	}
	if e.spec.Role == plan.RolePrefill && e.spec.Kind != plan.KindVLLM {
		n = 1 // SGLang's prefill engine answers with the first token only
	}
	return n, reason, nil
}

// job is one accepted chat completion on its way through a rank.
type job struct {
	req     *chatRequest
	rank    *rank
	sreq    *request
	id      string
	created int64
	reason  string
	inputs  int
	// transfer is the vLLM KV hand-over a remote-decode prefill finishes, if any.
	transfer roomKey
}

func (e *Engine) handleChat(w http.ResponseWriter, r *http.Request) { e.generate(w, r, e.decodeChat) }

// requestFaults plays the faults that hang or fail a request before the engine reads it;
// handled reports that the request was answered (or left hanging) by one.
func (e *Engine) requestFaults(w http.ResponseWriter, r *http.Request) (fs *faultState, handled bool) {
	fs = e.faults.Load()
	switch {
	case fs.Hang:
		e.hang(r.Context())
		return fs, true
	case !e.delayFirstByte(r.Context(), fs.Faults):
		return fs, true
	case fs.failNow():
		writeError(w, fs.FailStatus, "Simulated failure.")
		return fs, true
	}
	return fs, false
}

// generate serves a generation request of any API: faults first, then the request's
// decoding into the engine's common form, its disaggregation part, and the answer in the
// API's shape once the batch scheduler has run it.
func (e *Engine) generate(w http.ResponseWriter, r *http.Request, decode func(http.ResponseWriter, *http.Request) (*chatRequest, *badRequest)) {
	fs, handled := e.requestFaults(w, r)
	if handled {
		return
	}
	req, bad := decode(w, r)
	if e.spec.Role == plan.RolePrefill && req.hasBootstrap() {
		// Tell a waiting decode peer how this prefill ended, whatever the path; after
		// settle has reported success this is a no-op.
		defer func() {
			err := errors.New("the prefill did not complete")
			if bad != nil {
				err = fmt.Errorf("prefill rejected the request: %s", bad.msg)
			}
			e.rooms.finish(req.roomKey(), err)
		}()
	}
	if bad != nil {
		writeError(w, bad.status, bad.msg)
		return
	}
	if fs.GarbageBody {
		writeGarbage(w, req.Stream)
		return
	}
	var j *job
	if j, bad = e.newJob(r.Context(), req); bad != nil {
		writeError(w, bad.status, bad.msg)
		return
	}
	defer j.rank.cancel(j.sreq) // frees the KV of a request whose client went away
	if req.Stream {
		e.stream(w, r.Context(), j, fs.Faults)
	} else {
		e.respond(w, r.Context(), j, fs.Faults)
	}
}

// newJob tokenizes the request, plays its disaggregation part and queues it on a rank.
func (e *Engine) newJob(ctx context.Context, req *chatRequest) (*job, *badRequest) {
	ids := req.promptIDs
	if req.api == apiChat {
		var err error
		ids, err = e.spec.Tokenizer.EncodeChat(nil, req.chat())
		if errors.Is(err, token.ErrUnpredictable) {
			// A multimodal prompt: the simulated engine has no vision tower, so its
			// text stands in, as it does for the router.
			ids, err = token.Standin{}.EncodeChat(nil, req.chat())
		}
		if err != nil {
			return nil, invalid("Failed to apply the chat template: %v", err)
		}
	}
	maxOut, reason, bad := e.outputBudget(req, len(ids))
	if bad != nil {
		return nil, bad
	}
	k := e.pickRank(req.DataParallelRank)
	var transferred bool
	switch {
	case e.remotePrefill(req):
		if bad := e.checkTransfer(req.KVTransferParams); bad != nil {
			return nil, bad
		}
		transferred = true
	case e.spec.Role == plan.RoleDecode && e.spec.Kind != plan.KindVLLM:
		if err := e.awaitPrefill(ctx, k, req.roomKey()); err != nil {
			return nil, &badRequest{status: http.StatusInternalServerError, msg: "KV transfer failed: " + err.Error()}
		}
		transferred = true
	}
	var hashes []int64
	if !transferred {
		hashes = token.BlockHashes(ids, e.spec.Config.BlockSize)
	}
	j := &job{
		req: req, rank: k, sreq: newRequest(ids, hashes, maxOut, transferred),
		id: fmt.Sprintf("chatcmpl-%016x", rand.Uint64()), created: time.Now().Unix(), reason: reason, inputs: len(ids),
	}
	k.submit(j.sreq)
	return j, nil
}

// awaitPrefill blocks a decode request until its prefill peer, when it runs in this
// process, has prefilled the room. Without a local peer there is nothing to wait for.
func (e *Engine) awaitPrefill(ctx context.Context, k *rank, key roomKey) error {
	if !e.rooms.isLocal(key.addr) {
		return nil
	}
	k.transferWaiting.Add(1)
	defer k.transferWaiting.Add(-1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-e.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	return e.rooms.wait(ctx, key, e.spec.Config.BootstrapTimeout)
}

// hang holds a request until the client gives up or the engine closes.
func (e *Engine) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-e.closing:
	}
}

// await blocks until j has generated more than seen tokens or finished, and returns the
// count; ok is false when the client went away or the engine closed.
func (e *Engine) await(ctx context.Context, j *job, seen int) (generated int, done, ok bool) {
	for {
		g, _, d := j.rank.progress(j.sreq)
		if g > seen || d {
			return g, d, true
		}
		select {
		case <-j.sreq.notify:
		case <-ctx.Done():
			return 0, false, false
		case <-e.closing:
			return 0, false, false
		}
	}
}

// settle reports a finished request's outcome: to a local decode peer when this engine
// prefills, and as usage for the response.
func (e *Engine) settle(j *job) usage {
	generated, cached, _ := j.rank.progress(j.sreq)
	switch {
	case j.transfer != roomKey{}:
		e.rooms.finish(j.transfer, nil)
	case e.spec.Role == plan.RolePrefill && e.spec.Kind != plan.KindVLLM:
		e.rooms.finish(j.req.roomKey(), nil)
	}
	return usage{
		PromptTokens: j.inputs, CompletionTokens: generated, TotalTokens: j.inputs + generated,
		PromptTokensDetails: &promptDetails{CachedTokens: cached},
	}
}
