package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzUnmarshal checks Unmarshal against a reference built on json.Decoder tokens: it never
// panics, accepts exactly the valid documents without repeated keys or case-folded field
// names, and decodes what it accepts as json.Unmarshal does.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"model":"a","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"model":"a","Model":"b"}`, `{"a":1,"a":2}`, `{"mod\u0065l":"x"}`, `[{"a":{"b":[1,2,{"c":null}]}}]`,
		`{"extra":{"Model":1}}`, `{"raw":{"x":"\"}"}}`, `"str"`, `12e3`, `{"by_name":{"k":{"Role":"x"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got request
		err := Unmarshal(data, &got)
		var want request
		stdErr := json.Unmarshal(data, &want)
		if stdErr != nil {
			if err == nil {
				t.Fatalf("accepted what encoding/json rejects: %v", stdErr)
			}
			return
		}
		refDup := referenceDuplicate(data)
		var ke *KeyError
		switch {
		case err == nil && refDup:
			t.Fatalf("accepted a document with a repeated key: %q", data)
		case err != nil && !errors.As(err, &ke):
			t.Fatalf("non-key error on a valid document: %v", err)
		case err != nil && ke.Field == "" && !refDup:
			t.Fatalf("reported a duplicate the reference does not see: %v", err)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("decoded %+v, encoding/json %+v", got, want)
		}
	})
}

// referenceDuplicate reports whether any object of a valid document repeats a key.
func referenceDuplicate(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				markValue(stack)
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.expect = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, expect: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:len(stack)-1]
			markValue(stack)
		default:
			markValue(stack)
		}
	}
}

type frame struct {
	object bool
	keys   map[string]bool
	expect bool // the next string token is a key
}

// markValue notes that a value completed inside the top frame: an object expects a key next.
func markValue(stack []*frame) {
	if len(stack) > 0 && stack[len(stack)-1].object {
		stack[len(stack)-1].expect = true
	}
}
