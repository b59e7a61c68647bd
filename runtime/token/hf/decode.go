package hf

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrUnknownID is wrapped by the error Decode returns for an id that is neither in the
// model's vocabulary nor an added token.
var ErrUnknownID = errors.New("id is not in the vocabulary")

// decoder turns ids back into text like tokenizers' ByteLevel decoder.
type decoder struct {
	blob     []byte   // the bytes of every id, back to back
	spans    []uint64 // id -> start<<32 | end in blob; noSpan for an unused id
	addedIDs map[string]uint32
	size     int // number of ids in use
}

const noSpan = ^uint64(0)

// Decode returns the text of ids as the HuggingFace tokenizer's decode does without
// skipping special tokens: vocabulary entries give the bytes they stand for, added tokens
// their content, and byte sequences that are not valid UTF-8 become U+FFFD as Rust's
// String::from_utf8_lossy does. An id outside the vocabulary is an error wrapping
// ErrUnknownID (HuggingFace skips such ids silently). transformers'
// clean_up_tokenization_spaces, an option of tokenizer_config.json rather than of the
// tokenizer, is not applied.
func (t *Tokenizer) Decode(ids []uint32) (string, error) {
	d := &t.dec
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if int64(id) >= int64(len(d.spans)) || d.spans[id] == noSpan {
			return "", fmt.Errorf("decode: id %d (vocabulary of %d ids): %w", id, d.size, ErrUnknownID)
		}
		sp := d.spans[id]
		buf = append(buf, d.blob[sp>>32:uint32(sp)]...)
	}
	if utf8.Valid(buf) {
		return string(buf), nil
	}
	return string(appendLossy(nil, buf)), nil
}

// appendLossy appends b to dst with each maximal ill-formed subsequence replaced by one
// U+FFFD, the Unicode "substitution of maximal subparts" practice that Rust's
// from_utf8_lossy and WHATWG decoders follow. (Go's own conversions replace every bad
// byte instead, which would give more U+FFFD than the engine.)
func appendLossy(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, b[:n]...)
			b = b[n:]
			continue
		}
		dst = utf8.AppendRune(dst, utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return dst
}

// maximalSubpart returns the length of the longest prefix of b that starts a well-formed
// UTF-8 sequence without completing one, or 1 if b[0] cannot start a sequence at all.
func maximalSubpart(b []byte) int {
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c >= 0xE0 && c <= 0xEF:
		need = 2
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F
		}
	case c >= 0xF0 && c <= 0xF4:
		need = 3
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F
		}
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		c := b[n]
		if k > 0 {
			lo, hi = 0x80, 0xBF
		}
		if c < lo || c > hi {
			break
		}
		n++
	}
	return n
}
