package chattemplate

import (
	"github.com/ardanlabs/jinja"

	"encoding/json"
	"testing"
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
		got, err := tpl.render(map[string]jinja.Value{"x": v})
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
	got, err := tpl.render(map[string]jinja.Value{"x": v})
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
