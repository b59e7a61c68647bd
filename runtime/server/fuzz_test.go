package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzExplainRequest feeds POST /admin/explain (control's decoder, on a loopback-only
// router): it never panics.
func FuzzExplainRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m","input_tokens":5,"max_tokens":3,"session_id":"s"}`, `{"input_tokens":-1}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`, `{}`} {
		f.Add([]byte(s))
	}
	srv, err := New(plainPlan("E1"), Options{})
	if err != nil {
		f.Fatal(err)
	}
	srv.loopbackOnly.Store(true)
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/admin/explain", bytes.NewReader(body)))
	})
}

// TestTokenCacheMetrics: preparing the same long conversation twice counts a miss per
// message, then a hit per message, in the token cache's series.
func TestTokenCacheMetrics(t *testing.T) {
	srv, err := New(plainPlan("E1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	read := func() (hits, misses float64) {
		fams, err := srv.metrics.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "tokenizer" || l[0].GetValue() != "standin" {
					continue
				}
				switch f.GetName() {
				case "router_token_cache_hits_total":
					hits = m.GetCounter().GetValue()
				case "router_token_cache_misses_total":
					misses = m.GetCounter().GetValue()
				}
			}
		}
		return hits, misses
	}
	body := longChat(2000)
	unseen(body) // new to this process's stand-in cache
	hits0, misses0 := read()
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		if _, err := srv.current().prepare(httptest.NewRecorder(), r, srv.current().models.Chat); err != nil {
			t.Fatal(err)
		}
	}
	hits, misses := read()
	const turns = 4 // 2000 words in turns of 500; the last user turn "and now?" is short
	if hits-hits0 < turns || misses-misses0 < turns {
		t.Fatalf("token cache series moved by %v hits and %v misses, want at least %d each", hits-hits0, misses-misses0, turns)
	}
}
