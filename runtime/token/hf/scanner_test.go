package hf

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// referenceSplitter returns regexp2 compiled with pattern as the reference for the scanner.
// The contraction group is spelled out with "ſ" added, because Oniguruma's (?i) folds
// "ſ" (U+017F) to "s" and regexp2's does not: the scanner follows Oniguruma, the engine
// of the tokenizers crate.
func referenceSplitter(t testing.TB, pattern string) regexSplitter {
	t.Helper()
	const ci = `(?i:'s|'t|'re|'ve|'m|'ll|'d)`
	if !strings.HasPrefix(pattern, ci) {
		t.Fatalf("pattern %q does not start with %q", pattern, ci)
	}
	pattern = `'(?:[sSſ]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])` + pattern[len(ci):]
	re, err := regexp2.Compile(pattern, regexp2.None, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	return regexSplitter{re}
}

var scannerPatterns = []struct {
	name    string
	pattern string
	sc      scanner
}{
	{"qwen", qwenPattern, scanner{maxDigits: 1}},
	{"llama", llamaPattern, scanner{maxDigits: 3}},
}

// checkScanner compares the scanner with regexp2 on s, for both patterns.
func checkScanner(t *testing.T, s string) {
	t.Helper()
	for _, p := range scannerPatterns {
		want := referenceSplitter(t, p.pattern).split(nil, s)
		if got := p.sc.split(nil, s); !slices.Equal(got, want) {
			t.Fatalf("%s scanner on %+q\n got %+q\nwant %+q", p.name, s, got, want)
		}
	}
}

// TestScannerMatchesRegexp2 runs the scanner and regexp2 over the golden texts.
func TestScannerMatchesRegexp2(t *testing.T) {
	for _, c := range loadGoldens(t) {
		checkScanner(t, c.Text)
	}
}

// TestScannerOniguruma pins splits of the Qwen pattern where JavaScript's regex engine
// (and so the goldens' generator) differs from Oniguruma. The expected pieces were
// obtained from Oniguruma itself (the vscode-oniguruma WebAssembly build of Oniguruma
// 6.9, npm), not from this package.
func TestScannerOniguruma(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		// (?i) folds U+017F to "s": a contraction.
		{"it'ſx ok", []string{"it", "'ſ", "x", " ok"}},
		// U+0085 is White_Space (JavaScript's \s lacks it) and not a letter or number.
		{"a \u0085b", []string{"a", " ", "\u0085b"}},
		{"a\u0085b", []string{"a", "\u0085b"}},
		// U+FEFF, U+180E, U+200B are not White_Space (JavaScript's \s has U+FEFF).
		{"a\ufeff b", []string{"a", "\ufeff", " b"}},
		{"a\u180e b", []string{"a", "\u180e", " b"}},
		{"a\u200b b", []string{"a", "\u200b", " b"}},
		{"x \u00a0y", []string{"x", " ", "\u00a0y"}},
		{"a\u001c b", []string{"a", "\u001c", " b"}},
	}
	sc := scanner{maxDigits: 1}
	for _, tt := range tests {
		if got := sc.split(nil, tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("split(%+q) = %+q, want %+q", tt.text, got, tt.want)
		}
		checkScanner(t, tt.text)
	}
}

// TestScannerDigits checks the one difference between the two patterns.
func TestScannerDigits(t *testing.T) {
	const text = "x1234567 ٣٤٥٦"
	if got, want := (scanner{maxDigits: 1}).split(nil, text), []string{"x", "1", "2", "3", "4", "5", "6", "7", " ", "٣", "٤", "٥", "٦"}; !slices.Equal(got, want) {
		t.Errorf("qwen: got %+q, want %+q", got, want)
	}
	if got, want := (scanner{maxDigits: 3}).split(nil, text), []string{"x", "123", "456", "7", " ", "٣٤٥", "٦"}; !slices.Equal(got, want) {
		t.Errorf("llama: got %+q, want %+q", got, want)
	}
}

// FuzzScanner compares the scanner with regexp2 on arbitrary text. Invalid UTF-8 is
// replaced for the comparison (regexp2 reports rune offsets that do not map back onto
// invalid bytes); on the raw input the pieces must still cover the text exactly.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{"Hello, world!", "I'm   here\r\n\r\n  ok", "x1234 ٣٤٥", "'ſx 'LL"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range scannerPatterns {
			got := p.sc.split(nil, s)
			if strings.Join(got, "") != s || slices.Contains(got, "") {
				t.Fatalf("%s scanner pieces %+q do not cover %+q", p.name, got, s)
			}
		}
		checkScanner(t, strings.ToValidUTF8(s, string(utf8.RuneError)))
	})
}
