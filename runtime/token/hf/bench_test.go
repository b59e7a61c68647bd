package hf

import (
	"os"
	"testing"
)

// uncached returns a copy of t without the pre-token cache, for the cold figures.
func uncached(t *Tokenizer) *Tokenizer {
	return &Tokenizer{added: t.added, normAdded: t.normAdded, nfc: t.nfc, pre: t.pre, model: t.model,
		prefix: t.prefix, suffix: t.suffix, dec: t.dec}
}

// BenchmarkEncode measures Encode on the documents of testdata/text (English prose, Go
// and Python source, Chinese/Japanese/Korean text) with the cache warm and without it.
func BenchmarkEncode(b *testing.B) {
	tok := loadQwen(b)
	for _, doc := range []string{"prose", "code", "cjk"} {
		text, err := os.ReadFile("testdata/text/" + doc + ".txt")
		if err != nil {
			b.Fatal(err)
		}
		s := string(text)
		b.Run(doc+"/warm", func(b *testing.B) {
			tok.Encode(s, false)
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				tok.Encode(s, false)
			}
		})
		b.Run(doc+"/off", func(b *testing.B) {
			off := uncached(tok)
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				off.Encode(s, false)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	tok := loadQwen(b)
	text, err := os.ReadFile("testdata/text/prose.txt")
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(string(text), false)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := tok.Decode(ids); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load(qwenPath); err != nil {
			b.Fatal(err)
		}
	}
}
