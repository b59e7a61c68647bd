package hf

import (
	"fmt"

	"github.com/dlclark/regexp2/v2"
)

// splitter cuts text into pre-tokens, appending them to dst in order; together they cover
// the text.
type splitter interface {
	split(dst []string, s string) []string
}

// keep says which parts of a text a Split keeps as pre-tokens.
type keep uint8

const (
	keepAll     keep = iota // behavior Isolated: matches and the text between them
	keepMatches             // behavior Removed with invert: only the matches
	keepGaps                // behavior Removed: only the text between matches
)

// newSplitter returns the splitter of a regex: the scanner for the patterns it knows
// (which match every character, so keeping all or keeping the matches is the same),
// regexp2 otherwise.
func newSplitter(pattern string, k keep) (splitter, error) {
	if k != keepGaps {
		switch pattern {
		case qwenPattern:
			return scanner{maxDigits: 1}, nil
		case llamaPattern:
			return scanner{maxDigits: 3}, nil
		case gpt2Pattern:
			return scanner{gpt2: true}, nil
		}
	}
	re, err := regexp2.Compile(pattern, regexp2.None, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		return nil, fmt.Errorf("split pattern %q: %w", pattern, err)
	}
	return regexSplitter{re: re, keep: k}, nil
}

// regexSplitter is the general Split engine. regexp2 is a backtracking engine like
// Oniguruma, and its \s, \p{L}, \p{N} and lookarounds mean the same; its (?i) folds case
// by lower-casing, so unlike Oniguruma it does not match "ſ" for "s". It is an order of
// magnitude slower than the scanner.
type regexSplitter struct {
	re   *regexp2.Regexp
	keep keep
}

// split appends the kept parts to dst, leaving out empty ones as tokenizers does.
func (r regexSplitter) split(dst []string, s string) []string {
	// Errors come only from match timeouts and stack limits, and both are disabled.
	idx, _ := r.re.FindAllStringIndex(s, -1)
	prev := 0
	for _, m := range idx {
		if prev < m[0] && r.keep != keepMatches {
			dst = append(dst, s[prev:m[0]])
		}
		if m[0] < m[1] && r.keep != keepGaps {
			dst = append(dst, s[m[0]:m[1]])
		}
		prev = m[1]
	}
	if prev < len(s) && r.keep != keepMatches {
		dst = append(dst, s[prev:])
	}
	return dst
}

// step is one pre-tokenizer of the sequence: a Split, or the final ByteLevel (whose
// byte-to-character mapping needs no work here, since the model works on bytes).
type step struct {
	prefixSpace bool     // ByteLevel add_prefix_space: prepend " " to pieces lacking one
	split       splitter // nil for a ByteLevel without use_regex
}

// preTokenizer applies its steps in order, each to every piece of the previous one.
type preTokenizer struct{ steps []step }

// scanner returns the scanner that is the whole pre-tokenizer, if it is one: its
// pre-tokens can then be taken one at a time, without a list of them all.
func (p preTokenizer) scanner() (scanner, bool) {
	if len(p.steps) != 1 || p.steps[0].prefixSpace {
		return scanner{}, false
	}
	sc, ok := p.steps[0].split.(scanner)
	return sc, ok
}

// split appends the pre-tokens of s to dst, using tmp as scratch; it returns both buffers
// for reuse.
func (p preTokenizer) split(dst, tmp []string, s string) ([]string, []string) {
	if len(p.steps) == 1 && !p.steps[0].prefixSpace && p.steps[0].split != nil {
		return p.steps[0].split.split(dst, s), tmp
	}
	cur := append(tmp[:0], s)
	for _, st := range p.steps {
		next := dst[:0]
		for _, piece := range cur {
			if st.prefixSpace && piece[0] != ' ' {
				piece = " " + piece
			}
			if st.split == nil {
				next = append(next, piece)
			} else {
				next = st.split.split(next, piece)
			}
		}
		cur, dst = next, cur
	}
	return cur, dst
}
