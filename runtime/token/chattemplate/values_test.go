package chattemplate

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/ardanlabs/jinja"

	"github.com/routerkit/router/runtime/token"
)

func TestDecodeValue(t *testing.T) {
	tests := []struct {
		in   string
		want string // the value through tojson
	}{
		{`{"b": 1, "a": [true, null, "x"], "c": {"z": 2.5, "y": -3}}`, `{"b": 1, "a": [true, null, "x"], "c": {"z": 2.5, "y": -3}}`},
		{`{"a": 1, "b": 2, "a": 3}`, `{"a": 3, "b": 2}`},
		{`[1e2, 7, 9223372036854775807]`, `[100, 7, 9223372036854775807]`},
		{`"<&> é \u2603"`, `"<&> é ☃"`},
	}
	tpl := mustParse(t, `{{ x | tojson }}`)
	for _, tt := range tests {
		v, err := decodeValue(json.RawMessage(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tpl.render(map[string]jinja.Value{"x": v}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestDecodeNumberKinds checks json.loads' split of integers and floats, which `is
// integer` and `is float` tests see.
func TestDecodeNumberKinds(t *testing.T) {
	tpl := mustParse(t, `{% for n in x %}{{ n is integer }}/{{ n is float }} {% endfor %}`)
	v, err := decodeValue(json.RawMessage(`[1, 1.0, 1e3, -0, 18446744073709551616]`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.render(map[string]jinja.Value{"x": v}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "True/False False/True False/True True/False False/True "; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDecodeValueErrors(t *testing.T) {
	for _, in := range []string{`{"a": }`, `[1] [2]`, `{"a": 1`} {
		if _, err := decodeValue(json.RawMessage(in)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
	v, err := decodeValue(nil)
	if err != nil || !v.IsUndefined() {
		t.Errorf("empty input: got %v, %v; want undefined", v, err)
	}
}

// TestPythonRepr: floats print as Python's json.dumps prints them; the expected texts are
// Python 3's json.dumps(json.loads(literal)).
func TestPythonRepr(t *testing.T) {
	for _, tt := range []struct{ literal, python string }{
		{"1.0", "1.0"}, {"0.0", "0.0"}, {"1234567.0", "1234567.0"}, {"1e16", "1e+16"}, {"1e-05", "1e-05"},
		{"0.0001", "0.0001"}, {"0.1", "0.1"}, {"1.5", "1.5"}, {"-2.0", "-2.0"}, {"123456789012345.6", "123456789012345.6"},
		{"1e22", "1e+22"}, {"5e-324", "5e-324"}, {"2.5e-7", "2.5e-07"}, {"1E3", "1000.0"}, {"100.25", "100.25"},
	} {
		f, err := strconv.ParseFloat(tt.literal, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := pythonRepr(f); got != tt.python {
			t.Errorf("pythonRepr(%s) = %s, want %s", tt.literal, got, tt.python)
		}
	}
}

// TestFloatUnpredictable: a tool schema holding 1.0, which the Jinja engine would print as
// 1 where the engine's json.dumps writes 1.0, makes the prompt unpredictable (the router
// then counts it without prefix hashes); 0.5, printed alike, does not.
func TestFloatUnpredictable(t *testing.T) {
	tpl := mustParse(t, `{{ tools | tojson }}`)
	for _, tt := range []struct {
		number string
		want   error
	}{{"1.0", token.ErrUnpredictable}, {"0.5", nil}, {"3", nil}} {
		tools := `[{"type": "function", "function": {"name": "f", "parameters": {"maximum": ` + tt.number + `}}}]`
		for _, e := range []Engine{VLLM, SGLang} {
			_, err := tpl.Render(chat(userHi, tools, ""), Options{Engine: e})
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Errorf("%s, %v: %v, want %v", tt.number, e, err, tt.want)
			}
		}
	}
}
