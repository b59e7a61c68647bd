package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/ardanlabs/jinja"

	"github.com/routerkit/router/runtime/strictjson"
	"github.com/routerkit/router/runtime/token"
)

// decodeValue turns raw JSON into a template value the way Python's json.loads does, which
// is what the engines hand to Jinja: objects keep their key order (json.dumps behind
// `tojson` writes keys in insertion order, so a reordered tool schema is another prompt),
// numbers without a fraction or exponent are integers and the others floats. Empty input
// decodes to undefined, so an absent field and an omitted one look the same.
//
// A json.Decoder token stream is used rather than json.Unmarshal into map[string]any
// because Go maps forget the order.
func decodeValue(raw json.RawMessage) (jinja.Value, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return jinja.Undefined(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeNext(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jinja.Undefined(), errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// decodeNext reads one complete JSON value from dec.
func decodeNext(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(t), nil
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		return numberValue(t)
	case json.Delim:
		if t == '[' {
			var items []jinja.Value
			for dec.More() {
				v, err := decodeNext(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := dec.Token() // ']'
			return jinja.NewList(items), err
		}
		d := jinja.NewDict()
		dict := d.AsDict()
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return jinja.Undefined(), err
			}
			v, err := decodeNext(dec)
			if err != nil {
				return jinja.Undefined(), err
			}
			// Python keeps the last value of a repeated key at the first key's place;
			// Dict.Set does the same.
			dict.Set(k.(string), v)
		}
		_, err := dec.Token() // '}'
		return d, err
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

// treeValue is decodeValue for JSON already parsed by strictjson.Parse (nil: absent), with
// the same result: strings are shared with the parsed document, not copied.
func treeValue(v *strictjson.Value) jinja.Value {
	if v == nil {
		return jinja.Undefined()
	}
	switch v.Kind {
	case strictjson.Bool:
		return jinja.NewBool(v.Bool)
	case strictjson.Number:
		n, err := numberValue(json.Number(v.Str))
		if err != nil {
			// Not reached: a literal of JSON's grammar always parses as a float.
			return jinja.NewString(v.Str)
		}
		return n
	case strictjson.String:
		return jinja.NewString(v.Str)
	case strictjson.Array:
		var items []jinja.Value
		if len(v.Elems) > 0 {
			items = make([]jinja.Value, len(v.Elems))
			for i := range v.Elems {
				items[i] = treeValue(&v.Elems[i])
			}
		}
		return jinja.NewList(items)
	case strictjson.Object:
		d := jinja.NewDict()
		dict := d.AsDict()
		for i, k := range v.Keys {
			dict.Set(k, treeValue(&v.Elems[i]))
		}
		return d
	}
	return jinja.None()
}

// numberValue follows json.loads: an integer literal is an int, anything with a fraction or
// an exponent is a float. Integers beyond int64 (Python has no limit) become floats.
func numberValue(n json.Number) (jinja.Value, error) {
	s := n.String()
	if !bytes.ContainsAny([]byte(s), ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return jinja.NewInt(i), nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("number %s: %w", s, err)
	}
	return jinja.NewFloat(f), nil
}

// ErrFloat is returned for a float the template would print as Python does not: the Jinja
// engine prints floats in Go's shortest form (1.0 as 1, 1234567.0 as 1.234567e+06) where
// json.dumps and str() write Python's repr (1.0, 1234567.0). The prompt is then not the
// engine's, so the router counts it without prefix hashes (token.ErrUnpredictable).
var ErrFloat = fmt.Errorf("a number prints differently in Python: %w", token.ErrUnpredictable)

// checkFloats returns ErrFloat for a value holding a float whose Python repr differs from
// the Jinja engine's text for it.
func checkFloats(v jinja.Value) error {
	switch {
	case v.IsList():
		for _, item := range v.AsList().Items {
			if err := checkFloats(item); err != nil {
				return err
			}
		}
	case v.IsDict():
		d := v.AsDict()
		for _, k := range d.Keys {
			if err := checkFloats(d.Data[k]); err != nil {
				return err
			}
		}
	case v.IsFloat():
		f := v.AsFloat()
		if py, goText := pythonRepr(f), strconv.FormatFloat(f, 'g', -1, 64); py != goText {
			return fmt.Errorf("%s (not %s): %w", py, goText, ErrFloat)
		}
	}
	return nil
}

// pythonRepr is Python's repr of a float (json.dumps writes the same): the shortest digits
// that read back exactly, in fixed notation with at least one decimal for exponents from
// -4 to 15, else in scientific notation with a two-digit exponent at least.
func pythonRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[bytes.IndexByte([]byte(sci), 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	fixed := strconv.FormatFloat(f, 'f', -1, 64)
	if !bytes.ContainsAny([]byte(fixed), ".") {
		fixed += ".0"
	}
	return fixed
}
