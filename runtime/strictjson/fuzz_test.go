package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/routerkit/router/runtime/arena"
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

// FuzzParse checks Parse against encoding/json and Check: it never panics, refuses
// exactly what Check refuses (with the same error), and its tree holds what
// encoding/json decodes, every value locating its own bytes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"a","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"model":"a","Model":"b"}`, `{"a":1,"a":2}`, `{"mod\u0065l":"x"}`, `[{"a":{"b":[1,2,{"c":null}]}}]`,
		`{"extra":{"Model":1}}`, `{"raw":{"x":"\"}"}}`, `"str"`, `12e3`, `{"by_name":{"k":{"Role":"x"}}}`,
		`"\ud800\udc00 \ud800x \udc00 \u00e9 é \xff\xfe"`, `[-0.5e+7, 0, -0, 1E2, true, false, null]`, " \t\n[1 , 2 ]\r\n",
		`{"messages":[{"ROLE":"x"}]}`, `[1,]`, `{"a":1,}`, `01`, `1.`, `"\x01"`, `"\q"`, `tru`, `{"a" 1}`,
		// After a first escape (escaped): escaped quotes and backslash runs before the
		// closing quote, raw control characters, bytes of multi-byte and invalid UTF-8.
		`["a\\", "\\\"", "x\"y\"", "\\\\\\"]`, "\"\\nabcdefgh\x01ijklmnop\"", "\"é\\n\x1f\"", "\"\\n\xff\xfe é\"",
		`"\n\u00e9\ud83d\ude00\ud800\"`, `"\n\u12"`, `"\n\`, `"abc\"`,
		// Ignored keys, whose values are validated but not built.
		`{"x":[0,{"a":"\n","a":1}],"model":"m"}`, `{"x":"\q"}`, `{"x":"\u12"}`, "{\"x\":\"\\n\x01\"}",
		`{"x":{"Model":1},"by_name":{"k":{"role":"r","x":[1,2]}}}`, `{"messages":[{"role":"u","x":{"y":[]}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := Check(data, (*request)(nil))
		// Parse sizes its containers once they are large; sizeAfter 0 sizes them all, and
		// cuts the strings with escapes from an arena (ParseIn).
		for _, sizeAfter := range []int{sizeAfter, 0} {
			var a *arena.Bytes
			if sizeAfter == 0 {
				a = arena.Get()
				defer a.Release()
			}
			v, err := parse(data, (*request)(nil), sizeAfter, a)
			if (err == nil) != (want == nil) || err != nil && err.Error() != want.Error() {
				t.Fatalf("Parse error %v, Check error %v", err, want)
			}
			if err != nil {
				return
			}
			checkTree(t, data, &v, schemaOf((*request)(nil)), sizeAfter == 0)
		}
	})
}

// checkTree checks that v is what encoding/json decodes from v's bytes in data, read as
// n, without the keys n's decoder ignores, and so on for every value inside it. When
// sized, the containers that own their members (all but structs' objects) hold them in
// slices of their exact size.
func checkTree(t *testing.T, data []byte, v *Value, n *node, sized bool) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data[v.Start:v.End]))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("value bytes %q: %v", data[v.Start:v.End], err)
	}
	if got := asAny(v); !reflect.DeepEqual(got, withoutIgnored(want, n)) {
		t.Fatalf("Parse gave %#v for %q, encoding/json %#v read as %+v", got, data[v.Start:v.End], want, n)
	}
	if sized && (n == nil || !n.ignores) && (cap(v.Elems) != len(v.Elems) || cap(v.Keys) != len(v.Keys)) {
		t.Fatalf("%q: %d members in slices of %d and %d", data[v.Start:v.End], len(v.Elems), cap(v.Elems), cap(v.Keys))
	}
	for i := range v.Elems {
		child := n
		if v.Kind == Object {
			child, _, _ = fieldOf(n, v.Keys[i])
		} else if n != nil {
			child = n.elem
		}
		checkTree(t, data, &v.Elems[i], child, sized)
	}
}

// withoutIgnored is x, decoded by encoding/json into an any, without the object keys
// that a decoder of n's type ignores, at any depth.
func withoutIgnored(x any, n *node) any {
	if n == nil {
		return x
	}
	switch x := x.(type) {
	case map[string]any:
		for k, e := range x {
			if n.fields != nil {
				if _, ok := n.fields[k]; !ok && n.ignores {
					delete(x, k)
					continue
				}
				x[k] = withoutIgnored(e, n.fields[k])
				continue
			}
			x[k] = withoutIgnored(e, n.elem)
		}
	case []any:
		for i, e := range x {
			x[i] = withoutIgnored(e, n.elem)
		}
	}
	return x
}

func asAny(v *Value) any {
	switch v.Kind {
	case Bool:
		return v.Bool
	case Number:
		return json.Number(v.Str)
	case String:
		return v.Str
	case Array:
		out := []any{}
		for i := range v.Elems {
			out = append(out, asAny(&v.Elems[i]))
		}
		return out
	case Object:
		out := map[string]any{}
		for i, k := range v.Keys {
			out[k] = asAny(&v.Elems[i])
		}
		return out
	}
	return nil
}
