// Package strictjson decodes JSON the way the engines behind the router (Python) read it,
// so the router never routes on a value the engine does not see.
//
// encoding/json matches object keys to struct fields case-insensitively and keeps the last
// of duplicate keys; Python's json keeps keys exact. {"model":"a","Model":"b"} would route
// to b while the engine serves a, and "max_tokens":30000,"MAX_TOKENS":1 would pass bucket
// limits with a budget the engine never applies. Unmarshal therefore rejects, at any depth,
// a key repeated in one object (escapes decoded, so "mod\u0065l" repeats "model") and a key
// that differs from a field of the target type only by case.
//
// A body costs memory in proportion to its size whatever its shape, because bodies come
// from anyone (TestAllocationPerByte, FuzzAllocationPerByte). Parse skips the values of
// keys the target type ignores, validating them without building anything, and builds
// the rest as a tree of Values whose containers are slices of their exact size: at most
// 64 bytes allocated per byte of body beyond a fixed allowance for the parser's stacks (a
// number in an array costs one 88-byte Value per two bytes), and an ignored field its
// share of the one copy of the body. Unmarshal and Check allocate at most 10 bytes a byte
// (the copies of json.RawMessage fields, and the set that finds repeats among an object's
// many keys).
//
// encoding/json/v2 (GOEXPERIMENT=jsonv2) was weighed against this package on the same
// bodies (BenchmarkDecoders) and not taken. Its Unmarshal into a request type refuses
// duplicate names and skips unknown ones without allocating, as Unmarshal here does, but
// it ignores a case variant of a field's name where this package refuses it with the
// field it resembles, so the key check would remain a pass of its own. And it has no
// tree with the positions of values in the body, which the router forwards in part and
// reads strings from without copying them: decoded into an any, a number array costs 43
// bytes a byte and small objects 52 (Parse: 45 and 26), with no positions, and its
// tokenizer alone, the base of a tree of our own, allocates 4 bytes a byte of a long
// string (0 here, beyond the body's copy) and 13 of an object of many keys (8 here).
package strictjson

import (
	"encoding/json"
	"fmt"
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

// clipAt is the length from which keys are clipped in error messages, which reach logs
// and clients, so that they stay short whatever the key.
const clipAt = 64

func clip(s string) string {
	if len(s) > clipAt {
		return s[:clipAt] + "..."
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
	n := schemaOf(v)
	s := scanner{data: data}
	if s.value(n) == nil {
		return nil
	}
	s = scanner{data: data, where: true}
	return s.value(n)
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
