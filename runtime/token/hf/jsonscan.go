package hf

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Loading Qwen3's tokenizer.json (11 MB, 151k vocabulary entries, 151k merges) through
// encoding/json costs about 0.85 s of CPU, 4 s under -race, paid again by every process that
// loads it. The scanner below reads the file's shape, its vocabulary and its merges without
// reflection and without a string allocation per entry. It takes only the regular forms
// real files use; on anything else (escapes aside, which it hands to encoding/json) it
// reports !ok and the caller decodes with encoding/json, which stays the reference for
// every value and every error message. FuzzFastLoad compares both on arbitrary input.

// jscan walks JSON text held as a string or a byte slice. Over a string, the strings it
// returns share the text's memory instead of being allocated.
type jscan[T string | []byte] struct {
	s     T
	i     int
	index func(T, byte) int // strings.IndexByte or bytes.IndexByte
}

func (sc *jscan[T]) ws() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\r', '\n':
			sc.i++
		default:
			return
		}
	}
}

// eat skips white space and then c, reporting whether c was there.
func (sc *jscan[T]) eat(c byte) bool {
	sc.ws()
	if sc.i < len(sc.s) && sc.s[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// peek skips white space and returns the next byte, or 0 at the end.
func (sc *jscan[T]) peek() byte {
	sc.ws()
	if sc.i < len(sc.s) {
		return sc.s[sc.i]
	}
	return 0
}

// atEnd skips white space and reports whether the text ends there.
func (sc *jscan[T]) atEnd() bool {
	sc.ws()
	return sc.i == len(sc.s)
}

// str reads a string. One without escapes or control characters in valid UTF-8 is taken
// as is; any other goes through encoding/json, so that escapes and invalid UTF-8 decode
// exactly as there.
func (sc *jscan[T]) str() (string, bool) {
	if !sc.eat('"') {
		return "", false
	}
	start := sc.i
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		switch {
		case c == '"':
			sc.i++
			if v := string(sc.s[start : sc.i-1]); utf8.ValidString(v) {
				return v, true
			}
			return sc.unquote(start - 1)
		case c == '\\' || c < 0x20:
			if !sc.skipString(start) {
				return "", false
			}
			return sc.unquote(start - 1)
		}
		sc.i++
	}
	return "", false
}

// skipString moves past the closing quote of a string whose content starts at start. It
// looks for quotes with IndexByte, which is much faster than a loop over the bytes, the
// more so under -race; a quote preceded by an odd number of backslashes is escaped.
func (sc *jscan[T]) skipString(start int) bool {
	sc.i = start
	for {
		j := sc.index(sc.s[sc.i:], '"')
		if j < 0 {
			return false
		}
		sc.i += j + 1
		odd := false
		for k := sc.i - 2; k >= start && sc.s[k] == '\\'; k-- {
			odd = !odd
		}
		if !odd {
			return true
		}
	}
}

// unquote decodes the string from quote to sc.i with encoding/json.
func (sc *jscan[T]) unquote(quote int) (string, bool) {
	var v string
	err := json.Unmarshal([]byte(sc.s[quote:sc.i]), &v)
	return v, err == nil
}

// skip moves past one value and returns where it starts. The value is only delimited,
// not checked: the caller decodes it with encoding/json or a strict parser below.
func (sc *jscan[T]) skip() (start int, ok bool) {
	sc.ws()
	start = sc.i
	if sc.i == len(sc.s) {
		return start, false
	}
	switch sc.s[sc.i] {
	case '"':
		return start, sc.skipString(sc.i + 1)
	case '{', '[':
		depth := 0
		for sc.i < len(sc.s) {
			switch sc.s[sc.i] {
			case '"':
				if !sc.skipString(sc.i + 1) {
					return start, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			sc.i++
			if depth == 0 {
				return start, true
			}
		}
		return start, false
	}
	for sc.i < len(sc.s) && !strings.ContainsRune(",}] \t\r\n", rune(sc.s[sc.i])) {
		sc.i++
	}
	return start, sc.i > start
}

// object calls member for each member of an object, with the value's span; member may
// read the value itself and must then leave sc.i past it, or return false to stop.
func (sc *jscan[T]) object(member func(key string, start, end int) bool) bool {
	if !sc.eat('{') {
		return false
	}
	if sc.eat('}') {
		return true
	}
	for {
		key, ok := sc.str()
		if !ok || !sc.eat(':') {
			return false
		}
		start, ok := sc.skip()
		if !ok || !member(key, start, sc.i) {
			return false
		}
		if sc.eat('}') {
			return true
		}
		if !sc.eat(',') {
			return false
		}
	}
}

// member decodes one member of an object into v with encoding/json, as decoding the
// whole object would.
func member(v any, key string, raw []byte) bool {
	k, err := json.Marshal(key)
	if err != nil {
		return false
	}
	obj := make([]byte, 0, len(k)+len(raw)+3)
	obj = append(append(append(append(append(obj, '{'), k...), ':'), raw...), '}')
	return json.Unmarshal(obj, v) == nil
}

// scanFile splits tokenizer.json into its components, returning the model as a span of
// text. Keys are matched as encoding/json matches them to fileJSON's fields; a repeated
// model is left to encoding/json. The result's Model is left nil.
func scanFile(text string) (f *fileJSON, model string, ok bool) {
	f = new(fileJSON)
	sc := &jscan[string]{s: text, index: strings.IndexByte}
	ok = sc.object(func(key string, start, end int) bool {
		if strings.EqualFold(key, "model") {
			// A span replaced by a later one would never be checked.
			if model != "" {
				return false
			}
			model = text[start:end]
			return true
		}
		return member(f, key, []byte(text[start:end]))
	})
	return f, model, ok
}

// scanModel decodes the model object as json.Unmarshal into modelJSON would, returning
// vocab and merges as spans of raw and leaving the result's Vocab and Merges nil.
func scanModel(raw string) (mj *modelJSON, vocab, merges string, ok bool) {
	mj = new(modelJSON)
	sc := &jscan[string]{s: raw, index: strings.IndexByte}
	ok = sc.object(func(key string, start, end int) bool {
		switch {
		case strings.EqualFold(key, "vocab") && vocab == "":
			vocab = raw[start:end]
		case strings.EqualFold(key, "merges") && merges == "":
			merges = raw[start:end]
		case strings.EqualFold(key, "vocab") || strings.EqualFold(key, "merges"):
			return false // a span replaced by a later one would never be checked
		default:
			return member(mj, key, []byte(raw[start:end]))
		}
		return true
	})
	if !ok || !sc.atEnd() {
		return nil, "", "", false
	}
	return mj, vocab, merges, true
}

// scanVocab reads an object of non-negative integers below 2^32. Its keys share raw's
// memory.
func scanVocab(raw string) (map[string]uint32, bool) {
	sc := &jscan[string]{s: raw, index: strings.IndexByte}
	if sc.peek() == 'n' {
		return nil, false
	}
	vocab := make(map[string]uint32, strings.Count(sc.s, ":"))
	ok := sc.object(func(key string, start, end int) bool {
		id, ok := parseID(sc.s[start:end])
		if ok {
			vocab[key] = id
		}
		return ok
	})
	if !ok || !sc.atEnd() {
		return nil, false
	}
	return vocab, true
}

// parseID parses a JSON integer in [0, 2^32) without sign, fraction or exponent.
func parseID(s string) (uint32, bool) {
	if len(s) == 0 || len(s) > 10 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return uint32(n), n < 1<<32
}

// mergesBound is at least the number of merges in raw, for sizing their table: its
// strings counted by their quotes, two per merge in the form ["a b", ...] and four in
// [["a", "b"], ...].
func mergesBound(raw string) int {
	sc := &jscan[string]{s: raw, index: strings.IndexByte}
	n := strings.Count(raw, `"`) / 2
	if sc.eat('[') && sc.peek() == '[' {
		n /= 2
	}
	return n
}

// scanMerges reads merges in either form, ["a b", ...] or [["a", "b"], ...], as
// decodeMerges does, and calls add with the parts of each, which share raw's memory,
// in order. It reports false when it stops early: on text it does not take, or when add
// returns false.
func scanMerges(raw string, add func(a, b string) bool) bool {
	sc := &jscan[string]{s: raw, index: strings.IndexByte}
	if !sc.eat('[') {
		return false
	}
	if sc.eat(']') {
		return sc.atEnd()
	}
	lines := sc.peek() == '"'
	for {
		if lines {
			l, ok := sc.str()
			if !ok {
				return false
			}
			if !strings.HasPrefix(l, "#version") {
				a, b, ok := strings.Cut(l, " ")
				if !ok || strings.Contains(b, " ") || !add(a, b) {
					return false
				}
			}
		} else {
			if !sc.eat('[') {
				return false
			}
			a, ok := sc.str()
			if !ok || !sc.eat(',') {
				return false
			}
			b, ok := sc.str()
			if !ok || !sc.eat(']') || !add(a, b) {
				return false
			}
		}
		if sc.eat(']') {
			return sc.atEnd()
		}
		if !sc.eat(',') {
			return false
		}
	}
}
