package hf

import (
	"os"
	"runtime"
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
			benchEncode(b, tok, s)
		})
		b.Run(doc+"/off", func(b *testing.B) {
			benchEncode(b, uncached(tok), s)
		})
	}
}

// benchEncode encodes s b.N times and reports allocations per KB of text besides the
// usual per-op figures.
func benchEncode(b *testing.B, tok *Tokenizer, s string) {
	b.SetBytes(int64(len(s)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		tok.Encode(s, false)
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/(float64(len(s))/1024), "allocs/KB")
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

func BenchmarkLoadQwen3(b *testing.B) {
	for b.Loop() {
		if _, err := Load(qwenPath); err != nil {
			b.Fatal(err)
		}
	}
}
