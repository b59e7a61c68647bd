package strictjson

import (
	"strings"
	"testing"
	"unsafe"
)

// A parser's stacks go back to the pool without pointers into the document they held,
// which would keep a long body alive, and empty.
func TestScratchPutClearsWhatWasUsed(t *testing.T) {
	sc := &scratch{}
	vals := make([]Value, 3, 8)
	keys := make([]string, 2, 8)
	for i := range vals {
		vals[i] = Value{Kind: String, Str: "body text", Keys: []string{"k"}, Elems: []Value{{}}}
	}
	others := make([]string, 1, 8)
	keys[0], keys[1], others[0] = "model", "messages", "x"
	sc.put(vals, keys, others)
	for i, v := range vals {
		if v.Str != "" || v.Keys != nil || v.Elems != nil {
			t.Fatalf("value %d kept %+v", i, v)
		}
	}
	if keys[0] != "" || keys[1] != "" || others[0] != "" {
		t.Fatalf("keys kept: %q %q", keys, others)
	}
	if len(sc.vals) != 0 || cap(sc.vals) != 8 || len(sc.keys) != 0 || cap(sc.keys) != 8 {
		t.Fatalf("stacks not kept for reuse: len %d cap %d, len %d cap %d", len(sc.vals), cap(sc.vals), len(sc.keys), cap(sc.keys))
	}
	// Stacks grown past maxScratch are left to the collector.
	big := &scratch{}
	big.put(make([]Value, 1, maxScratch+1), nil, nil)
	if big.vals != nil {
		t.Fatal("a huge stack was kept")
	}
}

// Documents parsed one after another with the pooled stacks do not share values.
func TestParsesDoNotShareStacks(t *testing.T) {
	a, err := Parse([]byte(`{"x":[1,2,{"y":"first"}],"z":"a"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(`{"p":{"q":["second","third"]}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Keys[0] != "x" || a.Elems[0].Elems[2].Elems[0].Str != "first" || a.Elems[1].Str != "a" {
		t.Fatalf("first tree changed by the second parse: %+v", a)
	}
	if b.Keys[0] != "p" || b.Elems[0].Elems[0].Elems[1].Str != "third" {
		t.Fatalf("second tree wrong: %+v", b)
	}
}

// TestParseViewsData holds Parse to its contract with large bodies: a string without
// escapes is a view of data, not of a copy, so parsing a long chat body allocates
// nothing in proportion to it; Unmarshal's strings stay copies.
func TestParseViewsData(t *testing.T) {
	content := strings.Repeat("the quick brown fox ", 50_000) // 1 MB, no escapes
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + content + `"}]}`)
	var v Value
	got := allocated(func() {
		var err error
		if v, err = Parse(body, (*chatLike)(nil)); err != nil {
			t.Fatal(err)
		}
	})
	if got > uint64(len(body))/16 {
		t.Errorf("Parse of a %d-byte body allocated %d bytes: a copy of it", len(body), got)
	}
	c := v.Get("messages").Elems[0].Get("content")
	if c == nil || c.Str != content {
		t.Fatalf("content not read: %v", c)
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(c.Str)))
	if base := uintptr(unsafe.Pointer(&body[0])); start < base || start >= base+uintptr(len(body)) {
		t.Errorf("content's string is not a view of the body")
	}
	var m struct {
		Model string `json:"model"`
	}
	if err := Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	body[len(`{"model":"`)] = 'x'
	if m.Model != "m" {
		t.Errorf("Unmarshal's string changed with the body: %q", m.Model)
	}
}
