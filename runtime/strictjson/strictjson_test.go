package strictjson

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type request struct {
	Model     *string            `json:"model"`
	Messages  []message          `json:"messages"`
	MaxTokens *int64             `json:"max_tokens"`
	Extra     map[string]any     `json:"extra"`
	ByName    map[string]message `json:"by_name"`
	Raw       json.RawMessage    `json:"raw"`
	Ignored   string             `json:"-"`
	embedded
}

// embedded's fields are read by encoding/json as request's own.
type embedded struct {
	Temperature *float64 `json:"temperature"`
}

func TestUnmarshalRejectsDifferentialKeys(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // substring of the error; "" means accepted
	}{
		{"plain", `{"model":"a","messages":[{"role":"user","content":"hi"}]}`, ""},
		{"case variant of a field", `{"model":"a","Model":"b"}`, `key "Model" in the top-level object: keys are case-sensitive, did you mean "model"?`},
		{"case variant alone", `{"MODEL":"b"}`, `did you mean "model"`},
		{"duplicate", `{"max_tokens":30000,"max_tokens":1}`, `duplicate key "max_tokens" in the top-level object`},
		{"duplicate through an escape", `{"model":"a","mod\u0065l":"b"}`, `duplicate key "model"`},
		{"nested case variant", `{"messages":[{"role":"user","Content":"x"}]}`, `key "Content" in messages[0]`},
		{"nested duplicate", `{"messages":[{"role":"user"},{"role":"user","role":"system"}]}`, `duplicate key "role" in messages[1]`},
		{"duplicate in an unread object", `{"tools":[{"a":1,"a":2}]}`, `duplicate key "a" in tools[0]`},
		{"unknown keys are fine", `{"model":"a","stream_options":{"include_usage":true}}`, ""},
		{"map keys are free", `{"extra":{"Model":1,"model":2}}`, ""},
		{"map element checked", `{"by_name":{"x":{"ROLE":"u"}}}`, `key "ROLE" in by_name.x`},
		{"raw message not schema-checked", `{"raw":{"Model":1}}`, ""},
		{"raw message still duplicate-checked", `{"raw":{"a":1,"a":1}}`, `duplicate key "a" in raw`},
		{"same key in sibling objects", `{"messages":[{"role":"a"},{"role":"b"}]}`, ""},
		{"case variant of an embedded struct's field", `{"Temperature":1}`, `key "Temperature" in the top-level object: keys are case-sensitive, did you mean "temperature"?`},
		{"embedded struct's field", `{"temperature":1}`, ""},
		{"kelvin sign folds to k", `{"ma` + "\u212a" + `":1, "model":"a"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req request
			err := Unmarshal([]byte(tc.body), &req)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("err = %v, want a *KeyError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestManyKeysUseASet(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 100 {
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
	}
	b.WriteString(`"kxxx":2}`)
	var v map[string]int
	if err := Unmarshal([]byte(b.String()), &v); err == nil || !strings.Contains(err.Error(), `duplicate key "kxxx"`) {
		t.Fatalf("err = %v, want the repeat of kxxx among 100 keys", err)
	}
}

func TestSyntaxErrorsAreJSONs(t *testing.T) {
	var req request
	var se *json.SyntaxError
	if err := Unmarshal([]byte(`{"model":`), &req); !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *json.SyntaxError", err)
	}
	if err := Check([]byte(`{"model":`), &req); !errors.As(err, &se) {
		t.Fatalf("Check err = %v, want a *json.SyntaxError", err)
	}
	if err := Check([]byte(`{"model":"a","model":"b"}`), &req); err == nil {
		t.Fatal("Check accepted a duplicate")
	}
}

func TestLongKeysAreClipped(t *testing.T) {
	key := strings.Repeat("m", 1<<20)
	err := Unmarshal([]byte(`{"`+key+`":1,"`+key+`":2}`), new(map[string]int))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("err has %d bytes, want a short message", len(err.Error()))
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	body := []byte(`{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"`+strings.Repeat("word ", 200)+`"},`, 50) + `{"role":"user","content":"x"}],"max_tokens":10}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req request
		if err := Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

type selfDecoding struct{ v string }

func (s *selfDecoding) UnmarshalJSON(data []byte) error {
	var raw struct {
		Name string `json:"name"`
	}
	err := json.Unmarshal(data, &raw)
	s.v = raw.Name
	return err
}

func TestRegisteredShapeChecksSelfDecodingTypes(t *testing.T) {
	type holder struct {
		Items []selfDecoding `json:"items"`
	}
	RegisterShape[selfDecoding, struct {
		Name string `json:"name"`
	}]()
	err := Unmarshal([]byte(`{"items":[{"name":"a"},{"NAME":"b"}]}`), new(holder))
	if err == nil || !strings.Contains(err.Error(), `key "NAME" in items[1]`) {
		t.Fatalf("err = %v, want the case variant inside the self-decoding type", err)
	}
}

func TestTopLevelKey(t *testing.T) {
	isBoot := func(k []byte) bool { return strings.HasPrefix(string(k), "bootstrap_") }
	for body, want := range map[string]bool{
		`{"model":"m","messages":[{"bootstrap_room":1}]}`: false,
		`{"model":"m","bootstrap_room":1}`:                true,
		`{"model":"m","bootstr\u0061p_port":1}`:           true,
		`{}`:                                              false,
		`{"a":{"b":"}"},"bootstrap_host":"x"}`:            true,
	} {
		if got := TopLevelKey([]byte(body), isBoot); got != want {
			t.Errorf("TopLevelKey(%s) = %v, want %v", body, got, want)
		}
	}
}

// BenchmarkParse is BenchmarkUnmarshal's body read by Parse, without the typed decode
// (`words`, one escape a message), and a conversation of English prose, whose quotes and
// line breaks are escapes every 70 bytes or so (`prose`).
func BenchmarkParse(b *testing.B) {
	prose, err := os.ReadFile("../token/hf/testdata/text/prose.txt")
	if err != nil {
		b.Fatal(err)
	}
	msg, _ := json.Marshal(map[string]string{"role": "user", "content": string(prose)})
	for _, tc := range []struct{ name, body string }{
		{"words", `{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"`+strings.Repeat("word ", 200)+`\n"},`, 50) + `{"role":"user","content":"x"}],"max_tokens":10}`},
		{"prose", `{"model":"m","messages":[` + strings.Repeat(string(msg)+",", 50) + `{"role":"user","content":"x"}],"max_tokens":10}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(body, (*request)(nil)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
