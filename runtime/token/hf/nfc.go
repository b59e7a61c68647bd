package hf

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// nfc returns norm.NFC.String(s) without norm's lookup of each character's properties
// where s is ASCII, Chinese, Japanese kana or Hangul syllables: text in those scripts
// is nearly always already in NFC, and for Chinese text the lookups were a sixth of
// the encoding's time.
//
// It relies on NFC working stretch by stretch: a character with a boundary before it
// (canonical combining class 0, and composing with nothing before it) starts a stretch
// that normalization never reaches back across. Each character nfcBoundary accepts is
// such a character and in NFC on its own (TestNFCBoundary checks them against norm's
// tables), so s is in NFC when every stretch from one of them to the next that holds
// any other character is; those stretches alone go to norm.NFC.IsNormalString, and s
// goes to norm.NFC.String only when one is not.
func nfc(s string) string {
	start, other := 0, false // the stretch since the last boundary; whether it holds another character
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			// A run of ASCII, every byte a boundary: the stretch before it ends at its
			// first byte, and the next starts at its last.
			if other && !norm.NFC.IsNormalString(s[start:i]) {
				return norm.NFC.String(s)
			}
			for i++; i < len(s) && s[i] < utf8.RuneSelf; i++ {
			}
			start, other = i-1, false
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			// For a stretch that starts with a byte outside UTF-8, IsNormalString can
			// say normal where String changes it (FuzzNFC found "\xf3\u0374", whose
			// U+0374 String maps to U+02B9): such text goes to norm whole.
			return norm.NFC.String(s)
		}
		if nfcBoundary(r) {
			if other && !norm.NFC.IsNormalString(s[start:i]) {
				return norm.NFC.String(s)
			}
			start, other = i, false
		} else {
			other = true
		}
		i += n
	}
	if other && !norm.NFC.IsNormalString(s[start:]) {
		return norm.NFC.String(s)
	}
	return s
}

// nfcBoundary reports whether r, not ASCII, is one of the characters of Chinese,
// Japanese and Korean text that nfc takes as boundaries: CJK unified ideographs, Hangul
// syllables, hiragana and katakana but their combining (voiced sound) marks, CJK
// punctuation but its combining tone marks, and fullwidth ASCII.
func nfcBoundary(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0xAC00 && r <= 0xD7A3:
		return true
	case r >= 0x3000 && r <= 0x3029, r >= 0x3041 && r <= 0x3096, r >= 0x30A1 && r <= 0x30FA, r >= 0xFF01 && r <= 0xFF5E:
		return true
	}
	return false
}
