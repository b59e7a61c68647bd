package legacy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// corpusLine is one real command line of testdata/corpus.txt and the page it came from.
type corpusLine struct {
	source string
	args   []string
}

// readCorpus reads testdata/corpus.txt: a "# URL" line, then the command line.
func readCorpus(t *testing.T) []corpusLine {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "corpus.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusLine
	source := ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "# http"):
			source = strings.TrimPrefix(line, "# ")
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			args, err := shellWords(line)
			if err != nil || source == "" {
				t.Fatalf("corpus line %q (source %q): %v", line, source, err)
			}
			out = append(out, corpusLine{source, commandOnly(args)})
			source = ""
		}
	}
	return out
}

// shellWords splits a command line as a POSIX shell does for unexpanded words: blanks
// separate, single quotes keep everything, double quotes keep all but \" and \\.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for i := 0; i < len(s); i++ {
		r := rune(s[i])
		switch {
		case quote == '\'' && r == '\'', quote == '"' && r == '"':
			quote = 0
		case quote == '\'':
			cur.WriteRune(r)
		case quote == '"' && r == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			i++
			cur.WriteByte(s[i])
		case quote == '"':
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// commandOnly drops what follows the command in a pasted shell line: a pipe, a
// redirection, a background or a list operator.
func commandOnly(args []string) []string {
	for i, a := range args {
		if a == "|" || a == "&" || a == "&&" || a == ";" || strings.HasPrefix(a, ">") || strings.HasPrefix(a, "2>") {
			return args[:i]
		}
	}
	return args
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`smg --api-key "a b" --x 'c "d"' e\f "g\"h"`)
	want := []string{"smg", "--api-key", "a b", "--x", `c "d"`, `e\f`, `g"h`}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("shellWords = %q, %v; want %q", got, err, want)
	}
}

// TestCorpus migrates every real command line of testdata/corpus.txt as written, and those
// that name no model again with router migrate's --model-id, and reports how many migrate
// and which flags the refused ones stop on. The figures are checked so that a change of
// coverage shows in review.
func TestCorpus(t *testing.T) {
	lines := readCorpus(t)
	var asWritten, withModel int
	blockers := map[string]int{}
	flagRe := regexp.MustCompile(`--[a-z0-9-]+`)
	for _, l := range lines {
		if _, err := translate(Input{Args: l.args}); err == nil {
			asWritten++
			continue
		}
		_, err := translate(Input{Args: l.args, ModelID: "m"})
		if err == nil {
			withModel++
			continue
		}
		var errs Errors
		if !errors.As(err, &errs) {
			t.Errorf("%s: %q: %v, want a refusal naming its reasons", l.source, l.args, err)
			continue
		}
		for _, e := range errs {
			key := e.Error()
			if f := flagRe.FindString(key); f != "" && strings.Index(key, f) < 40 {
				key = f
			} else if len(key) > 60 {
				key = key[:60]
			}
			blockers[key]++
		}
	}
	refused := len(lines) - asWritten - withModel
	var keys []string
	for k := range blockers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return blockers[keys[i]] > blockers[keys[j]] || blockers[keys[i]] == blockers[keys[j]] && keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %3d %s", blockers[k], k)
	}
	t.Logf("corpus: %d command lines; %d migrate as written, %d more once router migrate is given --model-id, %d refused; what the refused ones stop on:%s",
		len(lines), asWritten, withModel, refused, b.String())
	if got, want := [3]int{asWritten, withModel, refused}, corpusFigures; got != want {
		t.Errorf("corpus figures (as written, with --model-id, refused) = %v, want %v: update corpusFigures and docs/migrate.md's Corpus section if the change is intended", got, want)
	}
}

// corpusFigures are the figures TestCorpus reports: as written, with --model-id, refused.
var corpusFigures = [3]int{4, 32, 85}
