package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// words is the simulated model's vocabulary: generated token i is words[i%len(words)]
// followed by a space, so the text re-tokenizes to exactly the reported completion tokens.
var words = strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod
	tempor incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud
	exercitation ullamco laboris nisi aliquip ex ea commodo consequat`)

func tokenText(i int) string { return words[i%len(words)] + " " }

type usage struct {
	PromptTokens        int            `json:"prompt_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	PromptTokensDetails *promptDetails `json:"prompt_tokens_details"`
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   usage    `json:"usage"`
	// KVTransferParams is what a vLLM prefill engine returns for the decode engine.
	KVTransferParams *kvTransferParams `json:"kv_transfer_params,omitempty"`
}

type choice struct {
	Index        int       `json:"index"`
	Message      message   `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// respond answers a non-streaming request once it has finished.
func (e *Engine) respond(w http.ResponseWriter, ctx context.Context, j *job, f Faults) {
	if !e.awaitDone(ctx, j) {
		return
	}
	var params *kvTransferParams
	if e.remoteDecode(j.req) && j.reason == "length" {
		// vLLM hands the KV over only when the prefill stopped on its token cap.
		params = e.newTransfer(j)
	}
	u := e.settle(j)
	var text strings.Builder
	for i := range u.CompletionTokens {
		text.WriteString(tokenText(i))
	}
	body, err := json.Marshal(e.answer(j, u, text.String(), params))
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if f.CutStream {
		_, _ = w.Write(body[:len(body)/2])
		cut()
	}
	_, _ = w.Write(body)
}

// awaitDone waits for j to finish; false means the client went away or the engine closed.
func (e *Engine) awaitDone(ctx context.Context, j *job) bool {
	seen := 0
	for {
		g, done, ok := e.await(ctx, j, seen)
		if !ok || done {
			return ok
		}
		seen = g
	}
}

// stream answers with server-sent events as SGLang does: a role chunk, one chunk per
// token, a chunk with the finish reason, a usage chunk when asked, and [DONE]. Like
// SGLang's generate loop, it sends the role chunk only once the first token exists, right
// before that token's chunk, so no body byte goes out before prefill has finished.
func (e *Engine) stream(w http.ResponseWriter, ctx context.Context, j *job, f Faults) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) {
		data, _ := json.Marshal(v) // plain structs of strings and numbers always marshal
		fmt.Fprintf(w, "data: %s\n\n", data)
	}
	var text strings.Builder
	sent, started := 0, false
	for {
		generated, done, ok := e.await(ctx, j, sent)
		if !ok {
			return
		}
		if !started && j.req.api == apiChat {
			empty := ""
			send(e.chatChunk(j, chunk{Choices: []chunkChoice{{Delta: delta{Role: "assistant", Content: &empty}}}}))
		}
		started = true
		for ; sent < generated; sent++ {
			if f.CutStream && sent >= f.CutAfterTokens {
				_ = rc.Flush()
				cut()
			}
			text.WriteString(tokenText(sent))
			send(e.streamToken(j, tokenText(sent), text.String(), sent+1))
		}
		_ = rc.Flush()
		if done {
			break
		}
	}
	if f.CutStream { // shorter than CutAfterTokens: still never end normally
		cut()
	}
	for _, c := range e.streamEnd(j, e.settle(j), text.String()) {
		send(c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// chatChunk fills a chat chunk's envelope.
func (e *Engine) chatChunk(j *job, c chunk) chunk {
	c.ID, c.Object, c.Created, c.Model = j.id, "chat.completion.chunk", j.created, e.spec.Model
	return c
}

// cut drops the connection without finishing the response: net/http closes it on this
// panic without logging, and the client sees a truncated body.
func cut() {
	panic(http.ErrAbortHandler)
}
