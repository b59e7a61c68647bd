package hf

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestNFCBoundary holds nfc's boundaries to norm's tables: each has a boundary before it
// and is in NFC on its own.
func TestNFCBoundary(t *testing.T) {
	n := 0
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if r >= utf8.RuneSelf && !nfcBoundary(r) {
			continue
		}
		n++
		s := string(r)
		if !norm.NFC.PropertiesString(s).BoundaryBefore() || !norm.NFC.IsNormalString(s) {
			t.Errorf("%U: nfc takes it for a boundary, but norm says boundary before %v, normal %v",
				r, norm.NFC.PropertiesString(s).BoundaryBefore(), norm.NFC.IsNormalString(s))
		}
	}
	if n < 20000 {
		t.Errorf("%d boundaries, want Chinese characters and Hangul syllables among them", n)
	}
}

var nfcCases = []string{
	"", "abc", "中文，测试。", "e\u0301", "中\u0301", "가\u11A8", "か\u3099", "カ\u309A", "Å", "\u212B", "ﬁ",
	"한국어 텍스트", "日本語のテキスト", "a\u0327\u0301", "中\xff\u0301", "\u0301中", "\xe4\xb8",
	"中" + strings.Repeat("\u0301", 40) + "文", "ｅ\u0301", "\u3000\u302A",
}

func TestNFC(t *testing.T) {
	for _, s := range nfcCases {
		if got, want := nfc(s), norm.NFC.String(s); got != want {
			t.Errorf("nfc(%+q) = %+q, want %+q", s, got, want)
		}
	}
	for _, doc := range []string{"cjk", "prose", "code"} {
		if s := readText(t, doc); nfc(s) != norm.NFC.String(s) {
			t.Errorf("nfc of %s.txt differs from norm's", doc)
		}
	}
}

// FuzzNFC compares nfc with norm.NFC.String.
func FuzzNFC(f *testing.F) {
	for _, s := range nfcCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := nfc(s), norm.NFC.String(s); got != want {
			t.Fatalf("nfc(%+q) = %+q, want %+q", s, got, want)
		}
	})
}
