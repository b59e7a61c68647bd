package sim

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/token"
)

// longSystem is a system prompt of several blocks, shared by the requests of a test.
var longSystem = strings.Repeat("You are a careful assistant who answers briefly and precisely. ", 8)

func params(user string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(longSystem), openai.UserMessage(user)},
	}
}

func promptTokens(user string) int64 {
	return int64(token.CountChat([]token.Message{{Role: "system", Content: longSystem}, {Role: "user", Content: user}}))
}

func TestChatCompletion(t *testing.T) {
	e := startEngine(t)
	c := client(e)
	ctx := testCtx(t)

	first, err := c.Chat.Completions.New(ctx, params("What is the capital of France?"))
	if err != nil {
		t.Fatal(err)
	}
	out := DefaultConfig().OutputTokens
	if first.Object != "chat.completion" || len(first.Choices) != 1 || first.Choices[0].FinishReason != "stop" {
		t.Fatalf("malformed completion: %s", first.RawJSON())
	}
	if got := first.Choices[0].Message.Content; token.Count(got) != out {
		t.Fatalf("content has %d tokens, want %d: %q", token.Count(got), out, got)
	}
	u := first.Usage
	if u.PromptTokens != promptTokens("What is the capital of France?") || u.CompletionTokens != int64(out) ||
		u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("usage = %s", u.RawJSON())
	}
	if !u.PromptTokensDetails.JSON.CachedTokens.Valid() {
		t.Fatal("usage lacks prompt_tokens_details.cached_tokens")
	}

	// A second question after the same system prompt hits its full blocks.
	p := params("And of Spain?")
	p.MaxTokens = openai.Int(3)
	second, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	bs := int64(DefaultConfig().BlockSize)
	if cached := second.Usage.PromptTokensDetails.CachedTokens; cached == 0 || cached%bs != 0 {
		t.Fatalf("cached_tokens = %d, want a positive multiple of %d", cached, bs)
	}
	if second.Usage.CompletionTokens != 3 || second.Choices[0].FinishReason != "length" {
		t.Fatalf("max_tokens 3: %s", second.RawJSON())
	}
}

func TestChatCompletionStreaming(t *testing.T) {
	e := startEngine(t)
	c := client(e)
	ctx := testCtx(t)
	for _, includeUsage := range []bool{true, false} {
		p := params("Tell me a story.")
		p.MaxCompletionTokens = openai.Int(5)
		if includeUsage {
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		stream := c.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		chunks, usageChunks := 0, 0
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			chunks++
			if ch.JSON.Usage.Valid() {
				usageChunks++
				if len(ch.Choices) != 0 {
					t.Fatal("the usage chunk must have no choices")
				}
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		// role chunk + 5 tokens + finish chunk (+ usage chunk)
		if want := 7 + usageChunks; chunks != want {
			t.Fatalf("include_usage=%v: %d chunks, want %d", includeUsage, chunks, want)
		}
		if includeUsage != (usageChunks == 1) {
			t.Fatalf("include_usage=%v: %d usage chunks", includeUsage, usageChunks)
		}
		if got := acc.Choices[0]; got.FinishReason != "length" || token.Count(got.Message.Content) != 5 {
			t.Fatalf("accumulated %q, finish %q", got.Message.Content, got.FinishReason)
		}
		if includeUsage && (acc.Usage.CompletionTokens != 5 || acc.Usage.PromptTokens != promptTokens("Tell me a story.")) {
			t.Fatalf("usage = %+v", acc.Usage)
		}
	}
}

func TestChatRejectsBadInput(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) { s.Config.ContextLength = 64; s.Config.KVCapacityTokens = 1024 })
	long := strings.Repeat("word ", 70)
	tests := []struct {
		name, body string
		status     int
		msg        string
	}{
		{"not json", `{"model":`, 400, "Invalid request body"},
		{"wrong type", `{"model":"m","messages":"hi"}`, 400, "Invalid request body"},
		{"no messages", `{"model":"m","messages":[]}`, 400, "Messages cannot be empty."},
		{"unknown model", `{"model":"other","messages":[{"role":"user","content":"x"}]}`, 404, "The model `other` does not exist."},
		{"bad role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, 400, "Invalid message role"},
		{"stream options without stream", chatBody(`,"stream_options":{"include_usage":true}`), 400, "Stream options can only be defined when `stream=True`."},
		{"max_tokens zero", chatBody(`,"max_tokens":0`), 400, "max_tokens must be at least 1"},
		{"negative temperature", chatBody(`,"temperature":-1`), 400, "temperature must be non-negative"},
		{"top_p zero", chatBody(`,"top_p":0`), 400, "top_p must be in (0, 1]"},
		{"n zero", chatBody(`,"n":0`), 400, "n must be at least 1"},
		{"n two streamed", chatBody(`,"n":2,"stream":true`), 400, "non-streamed chat completions only"},
		{"n too many", chatBody(`,"n":129`), 400, "at most 128 choices"},
		{"input too long", `{"model":"m","messages":[{"role":"user","content":"` + long + `"}]}`, 400, "is longer than the model's context length (64 tokens)"},
		{"output too long", chatBody(`,"max_tokens":60`), 400, "Requested token count exceeds the model's maximum context length of 64 tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := do(t, http.MethodPost, e.URL()+"/v1/chat/completions", tt.body)
			var got apiError
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("error body is not JSON: %s", body)
			}
			if status != tt.status || got.Code != tt.status || got.Object != "error" || !strings.Contains(got.Message, tt.msg) {
				t.Fatalf("got %d %s, want %d containing %q", status, body, tt.status, tt.msg)
			}
		})
	}
}

func TestClientDisconnectFreesTheEngine(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) {
		s.Config.TimeScale = 1
		s.Config.OutputTokens = 10000
		s.Config.ContextLength = 16384
	})
	ctx, cancel := testCtxCancel(t)
	done := make(chan error, 1)
	go func() {
		c := client(e)
		_, err := c.Chat.Completions.New(ctx, params("Go on forever."))
		done <- err
	}()
	wait.For(t, "the request to run", func() bool { return e.ranks[0].load().Running == 1 })
	cancel()
	<-done
	wait.For(t, "the aborted request to leave", func() bool { l := e.ranks[0].load(); return l.Running == 0 && l.UsedTokens == 0 })
}

// TestStreamStartsAfterPrefill checks that a stream sends nothing, not even the role
// chunk, before its prefill has produced the first token, as SGLang's generate loop does:
// otherwise a router's time to first byte would not see the prefill at all.
func TestStreamStartsAfterPrefill(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) { s.Config.PrefillOverhead = 30 * time.Second })
	k := e.ranks[0]
	prefill := k.scale(e.spec.Config.PrefillOverhead) // 300 ms of wall-clock time

	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, e.URL()+"/v1/chat/completions",
		strings.NewReader(chatBody(`,"stream":true,"max_tokens":2`)))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	first, err := body.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	elapsed, generated := time.Since(start), k.load().generatedTokens
	if generated == 0 {
		t.Fatalf("the first event arrived %v after the request, before the prefill (%v) produced a token: %q", elapsed, prefill, first)
	}
	if elapsed < prefill/2 {
		t.Fatalf("the first event arrived %v after the request, the prefill alone takes %v", elapsed, prefill)
	}

	rest, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, line := range strings.Split(first+string(rest), "\n") {
		if line != "" {
			events = append(events, line)
		}
	}
	want := []string{`"delta":{"role":"assistant","content":""}`, `"delta":{"content":"` + tokenText(0) + `"}`,
		`"delta":{"content":"` + tokenText(1) + `"}`, `"delta":{},"logprobs":null,"finish_reason":"length"`, `[DONE]`}
	if len(events) != len(want) {
		t.Fatalf("got %d events, want %d: %q", len(events), len(want), events)
	}
	for i, ev := range events {
		if !strings.HasPrefix(ev, "data: ") || !strings.Contains(ev, want[i]) {
			t.Errorf("event %d = %q, want it to contain %q", i, ev, want[i])
		}
	}
}
