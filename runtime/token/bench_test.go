package token

import (
	"strings"
	"testing"
)

// prose is about 4 KB of English text, the size of a typical chat prompt.
var prose = strings.Repeat("The quick brown fox jumps over the lazy dog, then rests: a 42-line poem (v2). ", 52)

func BenchmarkEncode(b *testing.B) {
	b.SetBytes(int64(len(prose)))
	for b.Loop() {
		Encode(prose)
	}
}

func BenchmarkCount(b *testing.B) {
	b.SetBytes(int64(len(prose)))
	for b.Loop() {
		Count(prose)
	}
}

func BenchmarkEncodeChat(b *testing.B) {
	msgs := []Message{{Role: "system", Content: prose[:1000]}, {Role: "user", Content: prose}}
	b.SetBytes(int64(len(prose) + 1000))
	for b.Loop() {
		EncodeChat(msgs)
	}
}

func BenchmarkBlockHashes(b *testing.B) {
	ids := Encode(prose)
	b.SetBytes(int64(4 * len(ids)))
	for b.Loop() {
		BlockHashes(ids, 16)
	}
}
