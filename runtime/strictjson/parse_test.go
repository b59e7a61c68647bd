package strictjson

import "testing"

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
