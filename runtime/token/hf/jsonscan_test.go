package hf

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"testing"
)

// FuzzFastLoad checks that whatever the scanner takes, encoding/json takes too and
// decodes to the same values, for the whole file, the model, the vocabulary and the
// merges. scanFile and scanModel only delimit the spans they leave to the parsers after
// them (the model; the vocabulary and merges), so their results are compared when those
// spans are valid JSON: an invalid one fails later, in scanVocab's or scanMerges'
// encoding/json fallback.
func FuzzFastLoad(f *testing.F) {
	for _, s := range []string{
		`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"added_tokens":[{"id":3,"content":"<s>"}]}`,
		`{"Model":{"Vocab":{"a\u0062":1,"x":4294967295,"y":4294967296},"merges":[["a","b"],["c","d"]],"dropout":null}}`,
		`{"vocab":{"\xff":1,"a":01,"b":-1,"c":1.5,"d":1e2,"e":null},"merges":["#version: 0.2","a b c"," "]}`,
		`{"model":null,"decoder":{"type":"ByteLevel"}} trailing`,
		`{"model":{"merges":[],"vocab":{}},"model":{"vocab":null,"merges":[["a"],["a","b","c"],"a b"]}}`,
		`{"a":[1,{"b":"]}\"["}],"model":{"type":"BPE","ignore_merges":true,"vocab":{"é":0}}}`,
		`{"model":{"type":"BPE","vocab":{"a":0},"merges":"a b","end_of_word_suffix":""}}`,
		`{"a":01}`,
		`{"a\\":0,"b\"":1,"\u00e9":2,"\ud800":3,"c":4294967296}`,
		`{"x":"\\\"","model":{"vocab":{}}}`,
		`["a b","\u0041 b","#version: 0.2"]`,
		`[["a","b"],["c\"","d"]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		text := string(data)
		if got, model, ok := scanFile(text); ok && validOrEmpty(model) {
			var want fileJSON
			if err := json.NewDecoder(bytes.NewReader(data)).Decode(&want); err != nil {
				t.Fatalf("scanFile took %q, encoding/json: %v", data, err)
			}
			if model != string(want.Model) {
				t.Fatalf("scanFile(%q) model = %q, encoding/json %q", data, model, want.Model)
			}
			want.Model = nil
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("scanFile(%q) = %+v, encoding/json %+v", data, *got, want)
			}
		}
		if got, vocab, merges, ok := scanModel(text); ok && validOrEmpty(vocab) && validOrEmpty(merges) {
			var want modelJSON
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatalf("scanModel took %q, encoding/json: %v", data, err)
			}
			if vocab != string(want.Vocab) || merges != string(want.Merges) {
				t.Fatalf("scanModel(%q) vocab, merges = %q, %q, encoding/json %q, %q", data, vocab, merges, want.Vocab, want.Merges)
			}
			want.Vocab, want.Merges = nil, nil
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("scanModel(%q) = %+v, encoding/json %+v", data, *got, want)
			}
		}
		if got, ok := scanVocab(text); ok {
			var want map[string]uint32
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatalf("scanVocab took %q, encoding/json: %v", data, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("scanVocab(%q) = %v, encoding/json %v", data, got, want)
			}
		}
		if got, ok := collectMerges(text); ok {
			want, err := decodeMerges(text)
			if err != nil {
				t.Fatalf("scanMerges took %q, decodeMerges: %v", data, err)
			}
			if len(got) != len(want) || len(got) > 0 && !reflect.DeepEqual(got, want) {
				t.Fatalf("scanMerges(%q) = %q, decodeMerges %q", data, got, want)
			}
			if n := mergesBound(text); n < len(got) {
				t.Fatalf("mergesBound(%q) = %d, below the %d merges", data, n, len(got))
			}
		}
	})
}

// collectMerges is scanMerges' merges as a list.
func collectMerges(raw string) ([][2]string, bool) {
	var pairs [][2]string
	ok := scanMerges(raw, func(a, b string) bool {
		pairs = append(pairs, [2]string{a, b})
		return true
	})
	return pairs, ok
}

// TestFastLoadTakesQwen3 checks that Qwen3's tokenizer.json goes through the scanner, not
// the encoding/json fallback, so that the load stays fast (BenchmarkLoadQwen3).
func TestFastLoadTakesQwen3(t *testing.T) {
	data := gunzipFile(t, qwenPath)
	_, model, ok := scanFile(string(data))
	if !ok {
		t.Fatal("scanFile did not take the file")
	}
	_, vocabText, mergesText, ok := scanModel(model)
	if !ok {
		t.Fatal("scanModel did not take the model")
	}
	vocab, ok := scanVocab(vocabText)
	if !ok || len(vocab) != 151643 {
		t.Fatalf("scanVocab: ok %v, %d entries, want 151643", ok, len(vocab))
	}
	merges, ok := collectMerges(mergesText)
	if !ok || len(merges) != 151387 || mergesBound(mergesText) < 151387 {
		t.Fatalf("scanMerges: ok %v, %d merges (bound %d), want 151387", ok, len(merges), mergesBound(mergesText))
	}
}

func gunzipFile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func validOrEmpty(raw string) bool { return raw == "" || json.Valid([]byte(raw)) }
