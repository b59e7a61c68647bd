// Package token is the tokenizer shared by the router and the engine simulator.
//
// Prefix-cache routing only works when the router and the engines agree on token ids and
// therefore on block boundaries. No real tokenizer vocabulary is available offline, so this
// package defines a small deterministic one instead, modelled on the dummy tokenizer of
// llm-d's inference simulator:
//
//   - Text is cut into pieces. A piece is a run of letters, digits and underscores (at most
//     [MaxWordBytes] bytes, cut on a rune boundary), or a single other non-space rune, and in
//     both cases the whitespace that follows it. Whitespace at the very start of a text is a
//     piece of its own.
//   - A piece's id is the 32-bit FNV-1a hash of its bytes.
//
// Identical text therefore gives identical ids, a text's ids are a prefix of the ids of any
// text that extends it at a piece boundary, and counts are close to those of a BPE vocabulary
// on English prose (one token per word). Ids are not those of any real model: a deployment
// against real engines needs the engines' own tokenizer.
package token

import (
	"unicode"
	"unicode/utf8"
)

// MaxWordBytes bounds one word piece so that a long run without spaces (a hash, base64 data)
// still counts as several tokens, as it would with a BPE vocabulary.
const MaxWordBytes = 12

// FNV-1a 32-bit parameters.
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// byte classes of ASCII characters, so the common case needs no rune decoding.
const (
	classOther = iota
	classWord
	classSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range utf8.RuneSelf {
		switch {
		case c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			t[c] = classWord
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			t[c] = classSpace
		}
	}
	return t
}()

// Encode returns the token ids of text.
func Encode(text string) []uint32 {
	return AppendEncode(make([]uint32, 0, len(text)/4+1), text)
}

// AppendEncode appends the token ids of text to dst and returns the extended slice.
func AppendEncode(dst []uint32, text string) []uint32 {
	for i := 0; i < len(text); {
		j := pieceEnd(text, i)
		dst = append(dst, hash(text[i:j]))
		i = j
	}
	return dst
}

// Count returns len(Encode(text)) without allocating.
func Count(text string) int {
	n := 0
	for i := 0; i < len(text); i = pieceEnd(text, i) {
		n++
	}
	return n
}

// pieceEnd returns the end of the piece that starts at s[i]; it is always > i.
func pieceEnd(s string, i int) int {
	start := i
	switch c, size := classAt(s, i); c {
	case classWord:
		i += size
		for i < len(s) {
			c, size := classAt(s, i)
			if c != classWord || i+size-start > MaxWordBytes {
				break
			}
			i += size
		}
	case classOther:
		i += size
	}
	for i < len(s) {
		c, size := classAt(s, i)
		if c != classSpace {
			break
		}
		i += size
	}
	return i
}

// classAt returns the class of the rune at s[i] and its length in bytes.
func classAt(s string, i int) (class uint8, size int) {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r) || unicode.IsDigit(r):
		return classWord, size
	case unicode.IsSpace(r):
		return classSpace, size
	}
	return classOther, size
}

// hash is FNV-1a over the bytes of piece, written out so it neither allocates nor converts.
func hash(piece string) uint32 {
	h := uint32(fnvOffset32)
	for i := 0; i < len(piece); i++ {
		h ^= uint32(piece[i])
		h *= fnvPrime32
	}
	return h
}
