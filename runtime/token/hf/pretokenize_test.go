package hf

import (
	"slices"
	"testing"
)

func TestRegexSplitterKeep(t *testing.T) {
	tests := []struct {
		k    keep
		want []string
	}{
		{keepAll, []string{"ab", "12", "cd", "345"}},
		{keepMatches, []string{"12", "345"}},
		{keepGaps, []string{"ab", "cd"}},
	}
	for _, tt := range tests {
		sp, err := newSplitter(`\d+`, tt.k)
		if err != nil {
			t.Fatal(err)
		}
		if got := sp.split(nil, "ab12cd345"); !slices.Equal(got, tt.want) {
			t.Errorf("keep %d: split = %q, want %q", tt.k, got, tt.want)
		}
	}
	// The scanner stands in for known patterns unless the gaps are wanted.
	if sp, _ := newSplitter(qwenPattern, keepMatches); sp != (scanner{maxDigits: 1}) {
		t.Errorf("newSplitter(qwen, keepMatches) = %#v, want the scanner", sp)
	}
	if _, ok := mustSplitter(t, qwenPattern, keepGaps).(regexSplitter); !ok {
		t.Error("newSplitter(qwen, keepGaps) is not regexp2")
	}
}

func mustSplitter(t *testing.T, pattern string, k keep) splitter {
	t.Helper()
	sp, err := newSplitter(pattern, k)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestPreTokenizerSteps runs a Split followed by a ByteLevel with add_prefix_space and
// its own regex: each piece of the Split gets its space, then GPT-2's pattern splits it.
func TestPreTokenizerSteps(t *testing.T) {
	p := preTokenizer{steps: []step{
		{split: mustSplitter(t, `\d+`, keepAll)},
		{prefixSpace: true, split: scanner{gpt2: true}},
	}}
	got, _ := p.split(nil, nil, "ab12 cd")
	if want := []string{" ab", " 12", " cd"}; !slices.Equal(got, want) {
		t.Errorf("split = %q, want %q", got, want)
	}
}
