package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDecodeChatOnePass: the bodies clients send are decoded in the one pass (messages
// and parsed fields come back), and bodies it refuses get the strict decoder's error.
func TestDecodeChatOnePass(t *testing.T) {
	for _, body := range fuzzSeeds[:1] {
		if _, msgs, parsed, herr := decodeChat([]byte(body)); herr != nil || msgs == nil || parsed == nil || parsed.Messages == nil {
			t.Errorf("%s: not decoded in one pass (error %v)", body, herr)
		}
	}
	if _, msgs, _, herr := decodeChat(longChat(1 << 10)); herr != nil || len(msgs) < 2 {
		t.Errorf("long chat: not decoded in one pass (error %v)", herr)
	}
	for body, want := range map[string]string{
		`{"model":"m","MODEL":"x","messages":[{"role":"user"}]}`:   `key "MODEL" in the top-level object: keys are case-sensitive, did you mean "model"?`,
		`{"model":"m","messages":[{"role":"user","role":"x"}]}`:    `duplicate key "role" in messages[0]`,
		`{"model":"m","messages":[{"role":"u"}],"max_tokens":"1"}`: `max_tokens: expected int64, got JSON string`,
		`{"model":"m","temperaturE":1,"messages":[{"role":"u"}]}`:  `did you mean "temperature"`,
		`{"model":"m","messages":[{"role":"u"}]`:                   `request body is not a JSON object`,
	} {
		_, _, _, herr := decodeChat([]byte(body))
		if herr == nil || !strings.Contains(herr.msg, want) {
			t.Errorf("%s: error %v, want it to contain %q", body, herr, want)
		}
	}
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
		if _, herr := srv.prepareChat(httptest.NewRecorder(), r); herr != nil {
			t.Fatal(herr.msg)
		}
	}
	hits, misses := read()
	const turns = 4 // 2000 words in turns of 500; the last user turn "and now?" is short
	if hits-hits0 < turns || misses-misses0 < turns {
		t.Fatalf("token cache series moved by %v hits and %v misses, want at least %d each", hits-hits0, misses-misses0, turns)
	}
}
