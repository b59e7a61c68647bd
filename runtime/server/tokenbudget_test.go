package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/answer"
)

// TestTokenizeBudgetIs413: with limits.max_tokenize_bytes at 64 KiB, a chat, a batch of
// prompts that together pass the limit, a /v1/tokenize prompt and an explain request
// are each answered 413 prompt_too_large naming the setting, none reaches an engine and
// none stays in flight; a chat under the limit is served.
func TestTokenizeBudgetIs413(t *testing.T) {
	p := qwenPlan()
	p.Limits.MaxTokenizeBytes = 64 << 10
	fc := startFleet(t, p)
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 1700) // 76 KiB
	half := long[:40<<10]
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + long + `"}]}`},
		{"/v1/completions", `{"model":"m","prompt":["` + half + `","` + half + `"],"max_tokens":1}`},
		{"/v1/tokenize", `{"model":"m","prompt":"` + long + `"}`},
		{"/admin/explain", `{"model":"m","text":"` + long + `"}`},
	} {
		status, body := fc.postJSON(t, c.path, c.body)
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%s: %v in %.200s", c.path, err, body)
		}
		if status != http.StatusRequestEntityTooLarge || e.Error.Code != answer.CodePromptTooLarge ||
			!strings.Contains(e.Error.Message, "limit of 65536 bytes") || !strings.Contains(e.Error.Message, "limits.max_tokenize_bytes") {
			t.Errorf("%s: %d %s, want 413 prompt_too_large naming the limit and limits.max_tokenize_bytes", c.path, status, body)
		}
	}
	fc.srv.active.wg.Wait() // the handlers have returned
	if n := len(fc.srv.active.slots); n != 0 {
		t.Errorf("%d requests still hold a slot after their 413", n)
	}
	fc.sent.mu.Lock()
	sent := len(fc.sent.sent)
	fc.sent.mu.Unlock()
	if sent != 0 {
		t.Fatalf("requests over the tokenization budget reached %d engines", sent)
	}
	if status, body := fc.postJSON(t, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+half+`"}],"max_tokens":1}`); status != http.StatusOK {
		t.Fatalf("a chat of 40 KiB under a 64 KiB budget: %d %.300s", status, body)
	}
}

// TestTokenizeStopsWithTheRequest: a request whose context has ended is not tokenized:
// the server hands the tokenizer the request's context, and answers as for a client
// that left.
func TestTokenizeStopsWithTheRequest(t *testing.T) {
	fc := startFleet(t, qwenPlan())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, path := range []string{"/v1/chat/completions", "/v1/tokenize"} {
		body := `{"model":"m","messages":[{"role":"user","content":"hello"}]}`
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		fc.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != answer.StatusClientClosed || rec.Header().Get("X-Router-Error-Code") != answer.CodeClientClosed {
			t.Errorf("%s with an ended context: %d %s, want %d client_closed", path, rec.Code, rec.Body, answer.StatusClientClosed)
		}
	}
}
