package hf

import (
	"slices"
	"testing"
)

// TestWholeTable checks vocabulary entries against scanMerge, the textbook statement of
// BPE: an entry the table holds must merge into its id alone, and one it leaves out
// (within maxWhole bytes) must not. Every entry of Qwen's merges into itself, and every
// fifth is checked (all of them take scanMerge 15 s under -race); the GPT-2 fixture has
// one that does not (Ġxy), and all of its are checked.
func TestWholeTable(t *testing.T) {
	if held := checkWhole(t, loadQwen(t), 5); held != 151643/5+1 {
		t.Errorf("Qwen: the table holds %d of the entries checked, want all %d", held, 151643/5+1)
	}
	if held := checkWhole(t, gpt2Like(t), 1); held != 258 {
		t.Errorf("GPT-2 fixture: the table holds %d entries, want 258 (all but Ġxy)", held)
	}
}

// checkWhole checks the entries of tok's table whose ids are multiples of every against
// scanMerge, and returns how many of those the table holds.
func checkWhole(t *testing.T, tok *Tokenizer, every uint32) int {
	m := tok.model
	held := 0
	for id := uint32(0); id < uint32(len(tok.dec.spans)); id += every {
		if !tok.dec.has(id) {
			continue
		}
		b := tokenText(tok, id)
		if _, added := tok.dec.addedIDs[b]; added {
			continue
		}
		syms := make([]uint32, 0, len(b))
		for i := 0; i < len(b); i++ {
			syms = append(syms, m.byteID[b[i]])
		}
		one := slices.Equal(scanMerge(m, syms), []uint32{id})
		got, ok := m.whole.get(b)
		switch {
		case ok && (!one || got != id):
			t.Fatalf("the table gives %q id %d; merging gives %v, want [%d]", b, got, scanMerge(m, syms), id)
		case !ok && one && len(b) <= maxWhole:
			t.Fatalf("the table leaves out %q, which merges into its id %d alone", b, id)
		}
		if ok {
			held++
		}
	}
	return held
}

func tokenText(tok *Tokenizer, id uint32) string {
	sp := tok.dec.spans[id]
	return string(tok.dec.blob[sp>>32 : uint32(sp)])
}

// FuzzWholeTable compares Encode with the table of whole tokens to Encode with an empty
// one, which merges every pre-token; neither has caches.
func FuzzWholeTable(f *testing.F) {
	for _, s := range []string{"Hello, world!", " the quick brown fox", "  \t\r\n x 12345 中文 😀", "func main() {\n\treturn\n}"} {
		f.Add(s)
	}
	tok := uncached(loadQwen(f))
	merged := uncached(tok)
	model := *tok.model
	model.whole = newWholeTable(0, nil)
	merged.model = &model
	f.Fuzz(func(t *testing.T, s string) {
		s = s[:min(len(s), 4096)]
		if got, want := tok.encodeAll(s, false), merged.encodeAll(s, false); !slices.Equal(got, want) {
			t.Fatalf("Encode(%+q) = %v with the table, %v without", s, got, want)
		}
	})
}
