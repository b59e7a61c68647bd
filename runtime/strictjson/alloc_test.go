package strictjson

import (
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// chatLike is runtime/server's chatRequest as the decoder sees it: the fields the router
// reads, json.RawMessage for what it forwards or renders (messages, tools, template
// arguments), and an embedded struct of sampling parameters.
type chatLike struct {
	Model     *string         `json:"model"`
	Messages  json.RawMessage `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	Kwargs    json.RawMessage `json:"chat_template_kwargs"`
	Stream    bool            `json:"stream"`
	MaxTokens *int64          `json:"max_tokens"`
	embedded
}

// shapedMessage decodes itself, as token.Message does; its registered shape is the keys
// it reads.
type shapedMessage struct{ role string }

func (m *shapedMessage) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role string `json:"role"`
	}
	err := json.Unmarshal(data, &raw)
	m.role = raw.Role
	return err
}

func init() {
	RegisterShape[shapedMessage, struct {
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}]()
}

// bodyShapes are JSON values of about n bytes each, of the forms that cost a decoder most
// per byte.
var bodyShapes = []struct {
	name string
	make func(n int) string
}{
	{"long string", func(n int) string { return `"` + strings.Repeat("a", n) + `"` }},
	{"escaped string", func(n int) string { return `"` + strings.Repeat(`\n`, n/2) + `"` }},
	{"number array", func(n int) string { return "[" + strings.Repeat("0,", n/2) + "0]" }},
	{"deep objects", func(n int) string {
		deep := strings.Repeat(`{"a":`, 500) + "0" + strings.Repeat("}", 500)
		return "[" + strings.Repeat(deep+",", n/len(deep)) + "0]"
	}},
	{"many keys", func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; b.Len() < n; i++ {
			b.WriteString(`"k` + strconv.Itoa(i) + `":0,`)
		}
		b.WriteString(`"end":0}`)
		return b.String()
	}},
	{"nested arrays", func(n int) string { return "[" + strings.Repeat("[[0]],", n/6) + "[]]" }},
	{"empty arrays", func(n int) string { return "[" + strings.Repeat("[],", n/3) + "[]]" }},
	{"small objects", func(n int) string { return "[" + strings.Repeat(`{"a":0},`, n/8) + "{}]" }},
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// perByte is the bytes allocated by Parse and by Unmarshal of body read as a chat
// request, per byte of body.
func perByte(t testing.TB, body []byte) (parse, unmarshal float64) {
	t.Helper()
	decode := func() {
		v, err := Parse(body, (*chatLike)(nil))
		if err != nil {
			t.Fatal(err)
		}
		if m := v.Get("messages"); m == nil || !m.KeysMatch((*[]shapedMessage)(nil)) {
			t.Fatalf("messages not read: %v", m)
		}
	}
	decode() // the schemas are built once, on the first decode of a type
	parse = float64(allocated(decode)) / float64(len(body))
	unmarshal = float64(allocated(func() {
		var req chatLike
		if err := Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
	})) / float64(len(body))
	return parse, unmarshal
}

func TestAllocationPerByte(t *testing.T) {
	const n = 256 << 10
	for _, s := range bodyShapes {
		value := s.make(n)
		ignored := `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":` + value + `}`
		read := `{"model":"m","messages":[{"role":"user","content":"hi","x":` + value + `}]}`
		ip, iu := perByte(t, []byte(ignored))
		rp, ru := perByte(t, []byte(read))
		t.Logf("%-15s ignored: Parse %6.2f Unmarshal %6.2f   read: Parse %6.2f Unmarshal %6.2f", s.name, ip, iu, rp, ru)
	}
}
