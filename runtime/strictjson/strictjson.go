// Package strictjson decodes JSON the way the engines behind the router (Python) read it,
// so the router never routes on a value the engine does not see.
//
// encoding/json matches object keys to struct fields case-insensitively and keeps the last
// of duplicate keys; Python's json keeps keys exact. {"model":"a","Model":"b"} would route
// to b while the engine serves a, and "max_tokens":30000,"MAX_TOKENS":1 would pass bucket
// limits with a budget the engine never applies. Unmarshal therefore rejects, at any depth,
// a key repeated in one object (escapes decoded, so "mod\u0065l" repeats "model") and a key
// that differs from a field of the target type only by case.
package strictjson

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// KeyError is a key the router refuses to interpret.
type KeyError struct {
	// Path locates the object holding the key, like messages[0]; empty at the top level.
	Path string
	Key  string
	// Field is the field the key differs from only by case; empty for a duplicate.
	Field string
}

func (e *KeyError) Error() string {
	where := "the top-level object"
	if e.Path != "" {
		where = e.Path
	}
	if e.Field != "" {
		return fmt.Sprintf("key %q in %s: keys are case-sensitive, did you mean %q?", clip(e.Key), where, e.Field)
	}
	return fmt.Sprintf("duplicate key %q in %s", clip(e.Key), where)
}

// clip keeps error messages (which reach logs and clients) short whatever the key.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// Unmarshal decodes data into v like json.Unmarshal, after rejecting duplicate keys and
// case-mismatched field names with a *KeyError. Syntax and type errors are json's own.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	return check(data, v)
}

// Check reports the first duplicate or case-mismatched key of data read as v, without
// decoding. It returns json's syntax error for data that is not valid JSON.
func Check(data []byte, v any) error {
	if !json.Valid(data) {
		var x any
		return json.Unmarshal(data, &x) // the syntax error, with its offset
	}
	return check(data, v)
}

func check(data []byte, v any) error {
	s := scanner{data: data}
	return s.value(schemaOf(v))
}

// pathElem is one step of the path to the current value: an object key or an index.
type pathElem struct {
	key   []byte
	index int
}

func pathString(path []pathElem) string {
	var b strings.Builder
	for _, p := range path {
		if p.key == nil {
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(clip(string(p.key)))
	}
	return b.String()
}

// TopLevelKey reports whether the object data (valid JSON) has a top-level key for
// which match is true. Escaped keys are decoded before matching.
func TopLevelKey(data []byte, match func(key []byte) bool) bool {
	s := scanner{data: data}
	s.ws()
	if s.i >= len(data) || data[s.i] != '{' {
		return false
	}
	s.i++
	for {
		s.ws()
		if data[s.i] == '}' {
			return false
		}
		raw, escaped := s.str()
		key := raw
		if escaped {
			var k string
			_ = json.Unmarshal(data[s.i-len(raw)-2:s.i], &k)
			key = []byte(k)
		}
		if match(key) {
			return true
		}
		s.ws()
		s.i++ // :
		_ = s.value(nil)
		s.ws()
		if data[s.i] == ',' {
			s.i++
		}
	}
}
