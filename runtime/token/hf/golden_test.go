package hf

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/routerkit/router/runtime/token"
)

// Tokenizer provides the methods of token.Tokenizer other than EncodeChat, which chat
// templates add on top.
var _ interface {
	Encode(m *token.Meter, text string, addSpecial bool) ([]uint32, error)
	Decode(ids []uint32) (string, error)
} = (*Tokenizer)(nil)

// encodeAll is Encode without a meter, which has no bound to fail on.
func (t *Tokenizer) encodeAll(text string, addSpecial bool) []uint32 {
	ids, err := t.Encode(nil, text, addSpecial)
	if err != nil {
		panic(fmt.Sprintf("Encode without a meter failed: %v", err))
	}
	return ids
}

const qwenPath = "../../../testdata/tokenizers/qwen3/tokenizer.json.gz"

var qwen = sync.OnceValues(func() (*Tokenizer, error) { return Load(qwenPath) })

// loadQwen returns the Qwen3 tokenizer, loaded once for all tests (it takes about a
// second).
func loadQwen(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := qwen()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type goldenCase struct {
	Name    string   `json:"name"`
	Text    string   `json:"text"`
	IDs     []uint32 `json:"ids"`
	Decoded string   `json:"decoded"`
}

func loadGoldens(t testing.TB) []goldenCase {
	t.Helper()
	b, err := os.ReadFile("testdata/goldens.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 1000 {
		t.Fatalf("goldens.json has %d cases, want at least 1000", len(g.Cases))
	}
	return g.Cases
}

// TestGoldens checks Encode and Decode against ids computed by transformers.js
// (testdata/gen_goldens.mjs) for the same Qwen3 tokenizer.json.
func TestGoldens(t *testing.T) {
	tok := loadQwen(t)
	for _, c := range loadGoldens(t) {
		t.Run(c.Name, func(t *testing.T) {
			// Twice: the second run is served from the pre-token cache.
			for range 2 {
				if got := tok.encodeAll(c.Text, false); !slices.Equal(got, c.IDs) {
					t.Fatalf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
				}
			}
			// Qwen's post-processor (ByteLevel) adds no ids.
			if got := tok.encodeAll(c.Text, true); !slices.Equal(got, c.IDs) {
				t.Fatalf("Encode(%q, true)\n got %v\nwant %v", c.Text, got, c.IDs)
			}
			got, err := tok.Decode(c.IDs)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.Decoded {
				t.Errorf("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
			}
		})
	}
}

// FuzzRoundTrip checks that decoding the ids of a valid UTF-8 text gives back the text in
// NFC, Qwen's normalization: byte-level BPE loses nothing else.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"Hello, world!", "<|im_start|>user\nhé\u0301<|im_end|>", "  \t\r\n x 12345 中文 😀", "'ſx '\u0085\ufeff"} {
		f.Add(s)
	}
	tok := loadQwen(f)
	f.Fuzz(func(t *testing.T, s string) {
		s = strings.ToValidUTF8(s, "\ufffd")
		got, err := tok.Decode(tok.encodeAll(s, false))
		if err != nil {
			t.Fatal(err)
		}
		if want := norm.NFC.String(s); got != want {
			t.Fatalf("Decode(Encode(%+q)) = %+q, want %+q", s, got, want)
		}
	})
}
