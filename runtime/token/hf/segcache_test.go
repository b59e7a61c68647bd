package hf

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
	"github.com/routerkit/router/runtime/token/chattemplate"
)

// withFreshSegments returns a copy of t sharing everything but an empty segment cache,
// so that a test sees its own misses and hits.
func withFreshSegments(t *Tokenizer) *Tokenizer {
	c := uncached(t)
	c.cache, c.segments = t.cache, token.NewSegmentCache(token.DefaultSegmentBytes)
	return c
}

// goldenConversations builds ChatML conversations from the golden texts (those without
// added tokens when plain is set, so that every turn is one long section), each turn at
// least MinSegment long, every conversation resending the previous one's turns.
func goldenConversations(t *testing.T, plain bool) []string {
	var turns []string
	var cur strings.Builder
	for _, c := range loadGoldens(t) {
		if plain && strings.Contains(c.Text, "<") {
			continue
		}
		cur.WriteString(c.Text)
		if cur.Len() >= token.MinSegment {
			turns = append(turns, cur.String())
			cur.Reset()
		}
	}
	var convs []string
	var conv strings.Builder
	for i, turn := range turns {
		role := []string{"user", "assistant"}[i%2]
		conv.WriteString("<|im_start|>" + role + "\n" + turn + "<|im_end|>\n")
		convs = append(convs, conv.String()+"<|im_start|>assistant\n")
	}
	return convs
}

// TestSegmentCacheIsExact: over conversations built from the golden corpus, growing turn
// by turn as a client resends its history, the ids with the segment cache (cold, then
// warm) are those of the tokenizer without any cache, and the cache was used.
func TestSegmentCacheIsExact(t *testing.T) {
	base := loadQwen(t)
	for _, plainOnly := range []bool{true, false} {
		tok, plain := withFreshSegments(base), uncached(base)
		convs := goldenConversations(t, plainOnly)
		if len(convs) < 20 {
			t.Fatalf("only %d conversations from the goldens", len(convs))
		}
		for pass := range 2 {
			for i, conv := range convs {
				want := plain.encodeAll(conv, false)
				if got := tok.encodeAll(conv, false); !slices.Equal(got, want) {
					t.Fatalf("pass %d, conversation %d: cached ids differ from uncached ones\n got %v\nwant %v", pass, i, got, want)
				}
			}
		}
		st := tok.CacheStats()
		// Conversation i resends the i turns of conversation i-1, one section each.
		if n := int64(len(convs)); plainOnly && (st.Misses != n || st.Hits != n*(n-1)/2+n*(n+1)/2) {
			t.Fatalf("%d conversations, cache stats %+v: want a miss per turn and a hit for every resent one", n, st)
		}
		if st.Hits == 0 {
			t.Fatalf("cache stats %+v: no hit", st)
		}
	}
}

// TestSegmentCacheWithStrippingTokens: added tokens that swallow the whitespace around
// them (lstrip, rstrip) and tokens matched after normalization give the same ids through
// the segment cache.
func TestSegmentCacheWithStrippingTokens(t *testing.T) {
	base := llamaLike(t)
	tok, plain := withFreshSegments(base), uncached(base)
	long := strings.Repeat("hello world cafe\u0301 x[W]y ", 20)
	for _, text := range []string{
		long + "  <mask>  " + long,
		long + "<|eot|>" + long + " <mask>" + long,
		"<|begin_of_text|>" + long + "<|eot|>",
		long + " [W] " + long,
	} {
		want := plain.encodeAll(text, true)
		for range 2 {
			if got := tok.encodeAll(text, true); !slices.Equal(got, want) {
				t.Fatalf("Encode(%.40q...) = %v, want %v", text, got, want)
			}
		}
	}
	if st := tok.CacheStats(); st.Hits == 0 {
		t.Fatalf("cache stats %+v: no hit", st)
	}
}

// FuzzSegmentCache checks that a text built from the fuzzer's pieces around Qwen's
// special tokens encodes to the same ids with the segment cache, cold and warm, as
// without any cache.
func FuzzSegmentCache(f *testing.F) {
	for _, s := range []string{"Hello, world!", " \n\t x", "é\u0301 中文 😀 12345", "'s 'll\r\n\r\n"} {
		f.Add(s, "user")
	}
	base := loadQwen(f)
	tok, plain := withFreshSegments(base), uncached(base)
	f.Fuzz(func(t *testing.T, s, role string) {
		body := strings.Repeat(s, token.MinSegment/max(len(s), 1)+1)
		text := "<|im_start|>" + role + "\n" + body + "<|im_end|>\n<|im_start|>" + role + body + s + "<|im_end|>" + body
		want := plain.encodeAll(text, false)
		for range 2 {
			if got := tok.encodeAll(text, false); !slices.Equal(got, want) {
				t.Fatalf("Encode(%+q)\n got %v\nwant %v", text, got, want)
			}
		}
	})
}

// TestModelChatCacheIsExact: a conversation over the golden texts, growing a turn at a
// time as a client resends it, gets through Model.EncodeChat (template, then the segment
// cache) the ids of its rendered prompt encoded without any cache.
func TestModelChatCacheIsExact(t *testing.T) {
	m, err := Open(plan.Tokenizer{Path: qwenPath, Config: "../../../testdata/tokenizers/qwen3/tokenizer_config.json", EngineKind: plan.KindSGLang})
	if err != nil {
		t.Fatal(err)
	}
	m.tok = withFreshSegments(m.tok)
	plain := uncached(m.tok)
	var msgs []map[string]string
	for i, c := range loadGoldens(t) {
		if i%25 != 0 || strings.Contains(c.Text, "<") {
			continue
		}
		msgs = append(msgs, map[string]string{"role": []string{"user", "assistant"}[len(msgs)%2], "content": strings.Repeat(c.Text+"\n", 8)})
		raw, err := json.Marshal(msgs)
		if err != nil {
			t.Fatal(err)
		}
		c := token.Chat{Messages: raw}
		prompt, err := m.tmpl.Render(c, chattemplate.Options{AddGenerationPrompt: true, Engine: m.engine})
		if err != nil {
			t.Fatal(err)
		}
		want := plain.encodeAll(prompt, false)
		for range 2 {
			if got, err := m.EncodeChat(nil, c); err != nil || !slices.Equal(got, want) {
				t.Fatalf("%d messages: cached chat ids differ from uncached ones (%v)", len(msgs), err)
			}
		}
	}
	if st := m.CacheStats(); len(msgs) < 10 || st.Hits < int64(len(msgs)) {
		t.Fatalf("%d messages, cache stats %+v: the cache was not used", len(msgs), st)
	}
}
