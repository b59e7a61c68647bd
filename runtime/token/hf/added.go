package hf

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	content    string
	id         uint32
	singleWord bool // only matched when not inside a word
	lstrip     bool // swallows the whitespace on its left
	rstrip     bool // swallows the whitespace on its right
}

// section is a stretch of text without added tokens, or one added token.
type section struct {
	text  string
	id    uint32
	token bool
}

// addedSet finds added tokens in text with the semantics of the tokenizers crate's
// AddedVocabulary::find_matches: leftmost-longest, non-overlapping matches (an
// Aho-Corasick automaton there), where a match rejected by single_word is skipped without
// rescanning its bytes, and lstrip/rstrip widen an accepted match over the adjacent
// whitespace.
type addedSet struct {
	first [256]bool        // bytes that start some token
	byte0 int              // the only first byte, or -1 when tokens start with several
	by3   map[uint32][]int // first three bytes -> indexes of the tokens of three or more, longest first
	short [256][]int       // first byte -> indexes of the tokens of one or two bytes, longest first
	toks  []addedToken
}

// key3 is the by3 key of the three bytes from s[i].
func key3(s string, i int) uint32 { return uint32(s[i])<<16 | uint32(s[i+1])<<8 | uint32(s[i+2]) }

func newAddedSet(toks []addedToken) *addedSet {
	a := &addedSet{toks: toks, by3: map[uint32][]int{}, byte0: -1}
	starts := map[byte]bool{}
	for i, t := range toks {
		c := t.content[0]
		a.first[c], starts[c] = true, true
		if len(t.content) >= 3 {
			k := key3(t.content, 0)
			a.by3[k] = append(a.by3[k], i)
		} else {
			a.short[c] = append(a.short[c], i)
		}
	}
	longestFirst := func(idx []int) {
		sort.SliceStable(idx, func(i, j int) bool { return len(toks[idx[i]].content) > len(toks[idx[j]].content) })
	}
	for _, idx := range a.by3 {
		longestFirst(idx)
	}
	for _, idx := range a.short {
		longestFirst(idx)
	}
	if len(starts) == 1 {
		for c := range starts {
			a.byte0 = int(c)
		}
	}
	return a
}

// next returns the leftmost-longest match at or after from: its start, end and token
// index, or start -1. A match of three bytes or more starts with its token's first three,
// so only the tokens that share them are tried, not every token of the first byte
// (Qwen3's two dozen all start with '<'), then the shorter ones.
func (a *addedSet) next(s string, from int) (start, end, tok int) {
	for i := from; i < len(s); i++ {
		if a.byte0 >= 0 {
			j := strings.IndexByte(s[i:], byte(a.byte0))
			if j < 0 {
				return -1, 0, 0
			}
			i += j
		} else if !a.first[s[i]] {
			continue
		}
		if i+3 <= len(s) {
			for _, k := range a.by3[key3(s, i)] {
				if strings.HasPrefix(s[i:], a.toks[k].content) {
					return i, i + len(a.toks[k].content), k
				}
			}
		}
		for _, k := range a.short[s[i]] {
			if strings.HasPrefix(s[i:], a.toks[k].content) {
				return i, i + len(a.toks[k].content), k
			}
		}
	}
	return -1, 0, 0
}

// split appends to dst the sections of s: the added tokens found in s and the text
// between them. Empty text sections are left out, as HuggingFace drops empty splits.
func (a *addedSet) split(dst []section, s string) []section {
	if a == nil {
		return append(dst, section{text: s})
	}
	offset := 0
	for from := 0; ; {
		start, stop, k := a.next(s, from)
		if start < 0 {
			break
		}
		from = stop
		t := &a.toks[k]
		if t.singleWord && (start > 0 && endsWithWord(s[:start]) || stop < len(s) && startsWithWord(s[stop:])) {
			continue
		}
		if t.lstrip {
			start = max(len(strings.TrimRightFunc(s[:start], isWhiteSpace)), offset)
		}
		if t.rstrip {
			stop = len(s) - len(strings.TrimLeftFunc(s[stop:], isWhiteSpace))
		}
		if offset < start {
			dst = append(dst, section{text: s[offset:start]})
		}
		dst = append(dst, section{id: t.id, token: true})
		offset = stop
	}
	if offset < len(s) {
		dst = append(dst, section{text: s[offset:]})
	}
	return dst
}

// isWord reports whether r matches \w of Rust's regex crate, which tokenizers uses for
// single_word: Alphabetic, marks, decimal digits, connector punctuation and joiners.
func isWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Pc, r) ||
		unicode.Is(unicode.Other_Alphabetic, r) || unicode.Is(unicode.Join_Control, r)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWord(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWord(r)
}

// isWhiteSpace reports whether r has the Unicode White_Space property, the meaning of \s
// in Oniguruma and in Rust's regex crate; unicode.IsSpace is defined as exactly that.
func isWhiteSpace(r rune) bool { return unicode.IsSpace(r) }
