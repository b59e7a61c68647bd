package hf

import (
	"unicode"
	"unicode/utf8"
)

// The patterns the scanner recognises, compared as strings with tokenizer.json's.
const (
	// qwenPattern is Qwen2/2.5/3's: one digit per pre-token.
	qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// llamaPattern is Llama 3's (OpenAI's cl100k_base): up to three digits per pre-token.
	llamaPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// gpt2Pattern is the regex of a ByteLevel pre-tokenizer with use_regex true.
	gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// Character classes of the patterns. Every character is in exactly one, which is why the
// patterns' alternatives cover any text without gaps.
const (
	cOther   = iota // not a letter, number or White_Space: [^\s\p{L}\p{N}]
	cLetter         // \p{L}
	cNumber         // \p{N}
	cSpace          // White_Space other than \r and \n
	cNewline        // \r or \n
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch r := rune(c); {
		case r == '\r' || r == '\n':
			t[c] = cNewline
		case isWhiteSpace(r):
			t[c] = cSpace
		case unicode.IsLetter(r):
			t[c] = cLetter
		case unicode.IsNumber(r):
			t[c] = cNumber
		}
	}
	return t
}()

// classAt returns the class and byte length of the character at s[i]. An invalid UTF-8
// byte is a one-byte cOther, like the U+FFFD it decodes to.
func classAt(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := decodeAt(s, i)
	switch {
	case isLetter(r):
		return cLetter, n
	case unicode.IsNumber(r):
		return cNumber, n
	case isWhiteSpace(r):
		return cSpace, n
	}
	return cOther, n
}

// isCJKLetter reports whether r is a CJK unified ideograph (U+4E00–U+9FFF) or a Hangul
// syllable (U+AC00–U+D7A3), every one of which is a letter: the ranges save Chinese and
// Korean text unicode.IsLetter's search of the letter table. TestCJKLetters holds them
// to it.
func isCJKLetter(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FFF || r >= 0xAC00 && r <= 0xD7A3
}

// isLetter reports whether r is \p{L}: Chinese characters and Hangul by their ranges,
// kana and the CJK marks (U+3000–U+30FF) by a bitmap of unicode.IsLetter's answers,
// the rest by unicode.IsLetter's search of its table. TestCJKLetters holds it to
// unicode.IsLetter.
func isLetter(r rune) bool {
	switch {
	case r < utf8.RuneSelf:
		return asciiClass[r] == cLetter
	case isCJKLetter(r):
		return true
	case r>>8 == 0x30:
		return kanaLetters[r>>6&3]>>(r&63)&1 != 0
	}
	return unicode.IsLetter(r)
}

// kanaLetters has bit r&255 set for each letter r of U+3000–U+30FF.
var kanaLetters = func() (b [4]uint64) {
	for r := rune(0x3000); r <= 0x30FF; r++ {
		if unicode.IsLetter(r) {
			b[r>>6&3] |= 1 << (r & 63)
		}
	}
	return b
}()

// decodeAt is utf8.DecodeRuneInString(s[i:]) with the three-byte characters of CJK
// text decoded inline: the standard one leaves them to a function call.
func decodeAt(s string, i int) (rune, int) {
	if i+2 < len(s) {
		c0, c1, c2 := s[i], s[i+1], s[i+2]
		if c0&0xF0 == 0xE0 && c1&0xC0 == 0x80 && c2&0xC0 == 0x80 {
			// Overlong forms and surrogates are invalid, as they are to utf8.
			if r := rune(c0&0x0F)<<12 | rune(c1&0x3F)<<6 | rune(c2&0x3F); r >= 0x800 && (r < 0xD800 || r > 0xDFFF) {
				return r, 3
			}
		}
	}
	return utf8.DecodeRuneInString(s[i:])
}

// scanner splits text as the Qwen, Llama 3 or GPT-2 pattern does under a backtracking
// engine (Oniguruma in tokenizers): at each position the first alternative that matches
// wins.
type scanner struct {
	maxDigits int  // Qwen and Llama: 1 for \p{N}, 3 for \p{N}{1,3}
	gpt2      bool // the GPT-2 pattern instead
}

func (sc scanner) split(dst []string, s string) []string {
	for i := 0; i < len(s); {
		j := sc.end(s, i)
		dst = append(dst, s[i:j])
		i = j
	}
	return dst
}

// end returns the end of the pre-token that starts at s[i].
func (sc scanner) end(s string, i int) int {
	if sc.gpt2 {
		return sc.nextGPT2(s, i)
	}
	return sc.next(s, i)
}

// next returns the end of the pre-token that starts at s[i].
func (sc scanner) next(s string, i int) int {
	c, n := classAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' {
		if k := contraction(s[i+1:]); k > 0 {
			return i + 1 + k
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == cLetter {
		return sc.run(s, i+n, cLetter)
	}
	if (c == cOther || c == cSpace) && i+n < len(s) {
		if c2, n2 := classAt(s, i+n); c2 == cLetter {
			return sc.run(s, i+n+n2, cLetter)
		}
	}
	// \p{N} or \p{N}{1,3}
	if c == cNumber {
		j := i + n
		for k := 1; k < sc.maxDigits && j < len(s); k++ {
			c2, n2 := classAt(s, j)
			if c2 != cNumber {
				break
			}
			j += n2
		}
		return j
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	j := i
	if s[i] == ' ' {
		j++
	}
	if j < len(s) {
		if c2, _ := classAt(s, j); c2 == cOther {
			j = sc.run(s, j, cOther)
			return sc.run(s, j, cNewline)
		}
	}
	// c is now cSpace or cNewline: the rest of the pattern is about the run of White_Space
	// at i. \s*[\r\n]+ backtracks to the run's last \r or \n.
	end, lastNL := i, -1
	for end < len(s) {
		c2, n2 := classAt(s, end)
		if c2 != cSpace && c2 != cNewline {
			break
		}
		end += n2
		if c2 == cNewline {
			lastNL = end
		}
	}
	if lastNL >= 0 {
		return lastNL
	}
	// \s+(?!\S) takes the whole run at the end of the text, else backtracks one character
	// so that the last space stays with the word that follows.
	if end == len(s) {
		return end
	}
	if _, k := utf8.DecodeLastRuneInString(s[i:end]); end-k > i {
		return end - k
	}
	// \s+ for a single space before a non-space.
	return end
}

// nextGPT2 returns the end of the pre-token of gpt2Pattern that starts at s[i]:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func (sc scanner) nextGPT2(s string, i int) int {
	if s[i] == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	// An optional space, then a run of letters, of numbers, or of other characters.
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j++
	}
	if c, _ := classAt(s, j); c == cLetter || c == cNumber || c == cOther {
		return sc.run(s, j, c)
	}
	// A run of White_Space (\r and \n included); \s+(?!\S) leaves the last one to the
	// word that follows, unless the run ends the text or is one character long.
	end := i
	for end < len(s) {
		c, n := classAt(s, end)
		if c != cSpace && c != cNewline {
			break
		}
		end += n
	}
	if end == len(s) {
		return end
	}
	if _, k := utf8.DecodeLastRuneInString(s[i:end]); end-k > i {
		return end - k
	}
	return end
}

// run returns the end of the run of class c characters starting at s[j].
func (scanner) run(s string, j int, c uint8) int {
	for j < len(s) {
		if b := s[j]; b < utf8.RuneSelf { // inline ASCII fast path
			if asciiClass[b] != c {
				return j
			}
			j++
			continue
		}
		c2, n := classAt(s, j)
		if c2 != c {
			break
		}
		j += n
	}
	return j
}

// contraction returns the length of the contraction suffix (after the apostrophe) that s
// starts with, or 0. Oniguruma's (?i) uses Unicode case folding, so "ſ" (U+017F, which
// folds to "s") counts as an s.
func contraction(s string) int {
	if s == "" {
		return 0
	}
	switch s[0] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && s[1]|0x20 == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && s[1]|0x20 == 'l' {
			return 2
		}
	}
	if len(s) >= 2 && s[0] == 0xC5 && s[1] == 0xBF {
		return 2
	}
	return 0
}
