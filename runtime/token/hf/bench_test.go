package hf

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// uncached returns a copy of t without the pre-token cache, for the cold figures.
func uncached(t *Tokenizer) *Tokenizer {
	return &Tokenizer{added: t.added, normAdded: t.normAdded, nfc: t.nfc, pre: t.pre, model: t.model,
		prefix: t.prefix, suffix: t.suffix, dec: t.dec}
}

// BenchmarkEncode measures Encode on the documents of testdata/text (English prose, Go
// and Python source, Chinese/Japanese/Korean text) and on two of 1 MiB of whitespace,
// each one pre-token: "spaces" is one run of spaces (mergeRuns), "lines" lines of 4095
// spaces (mergeRanks). "warm" has the caches warm, "off" none, and "heap" none and the
// merge order of the tokenizers crate, one heap of every candidate (mergeHeap), as
// before mergeRanks.
func BenchmarkEncode(b *testing.B) {
	tok := loadQwen(b)
	heap := uncached(tok)
	model := *tok.model
	model.monotone = false
	heap.model = &model
	for _, doc := range []string{"prose", "code", "cjk", "spaces", "lines"} {
		var text string
		switch doc {
		case "spaces":
			text = strings.Repeat(" ", 1<<20)
		case "lines":
			text = strings.Repeat(strings.Repeat(" ", 4095)+"\n", 256)
		default:
			data, err := os.ReadFile("testdata/text/" + doc + ".txt")
			if err != nil {
				b.Fatal(err)
			}
			text = string(data)
		}
		b.Run(doc+"/warm", func(b *testing.B) {
			tok.encodeAll(text, false)
			benchEncode(b, tok, text)
		})
		b.Run(doc+"/off", func(b *testing.B) {
			benchEncode(b, uncached(tok), text)
		})
		b.Run(doc+"/heap", func(b *testing.B) {
			benchEncode(b, heap, text)
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
		tok.encodeAll(s, false)
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
	ids := tok.encodeAll(string(text), false)
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
