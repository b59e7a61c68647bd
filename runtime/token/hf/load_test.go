package hf

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeFixture writes a tokenizer.json whose vocabulary gives byte b the id b (as the
// byte-level symbol of b) plus the entries of extra, and whose other fields are fields
// (raw JSON by key). It returns the file's path.
func writeFixture(t *testing.T, extra map[string]uint32, fields map[string]string) string {
	t.Helper()
	vocab := map[string]uint32{}
	for b, r := range byteRune {
		vocab[string(r)] = uint32(b)
	}
	for k, v := range extra {
		vocab[k] = v
	}
	model := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(fields["model"]), &model); err != nil {
		t.Fatal(err)
	}
	vb, err := json.Marshal(vocab)
	if err != nil {
		t.Fatal(err)
	}
	model["vocab"] = vb
	file := map[string]json.RawMessage{}
	for k, v := range fields {
		file[k] = json.RawMessage(v)
	}
	if file["model"], err = json.Marshal(model); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// llamaLike is a Llama 3-style fixture: NFC, the Llama Split pattern, ignore_merges,
// merges as "a b" strings, a BOS template, and added tokens with every flag. Expected ids
// in the tests below are worked out by hand from these tables: a byte's id is the byte.
func llamaLike(t *testing.T) *Tokenizer {
	t.Helper()
	extra := map[string]uint32{
		"he": 256, "ll": 257, "hell": 258, "hello": 259, "Ġw": 260, "or": 261, "Ġwor": 262,
		"ld": 263, "Ġworld": 264,
		"abc": 265, "hel": 266, // no merge makes these: only ignore_merges reaches them
	}
	path := writeFixture(t, extra, map[string]string{
		"added_tokens": `[
			{"id": 300, "content": "<|begin_of_text|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			{"id": 301, "content": "<|eot|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			{"id": 302, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": false},
			{"id": 303, "content": "[W]", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
			{"id": 304, "content": "cafe\u0301", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}]`,
		"normalizer": `{"type": "Sequence", "normalizers": [{"type": "NFC"}]}`,
		"pre_tokenizer": `{"type": "Sequence", "pretokenizers": [
			{"type": "Split", "pattern": {"Regex": ` + jsonString(llamaPattern) + `}, "behavior": "Isolated", "invert": false},
			{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}`,
		"post_processor": `{"type": "Sequence", "processors": [
			{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
			{"type": "TemplateProcessing",
			 "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
			 "pair": [],
			 "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [300], "tokens": ["<|begin_of_text|>"]}}}]}`,
		"decoder": `{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`,
		"model": `{"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
			"end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": true,
			"merges": ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"]}`,
	})
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

type encodeCase struct {
	text       string
	addSpecial bool
	want       []uint32
}

func checkEncode(t *testing.T, tok *Tokenizer, tests []encodeCase) {
	t.Helper()
	for _, tt := range tests {
		if got := tok.encodeAll(tt.text, tt.addSpecial); !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q, %v) = %v, want %v", tt.text, tt.addSpecial, got, tt.want)
		}
	}
}

func TestLlamaLike(t *testing.T) {
	tok := llamaLike(t)
	checkEncode(t, tok, []encodeCase{
		{"hello world", false, []uint32{259, 264}},
		// Merges: he he (rank 0), ll ll, hell hell, hello hello.
		{"hellohello", false, []uint32{259, 259}},
		// ignore_merges: whole pre-tokens in the vocabulary are one id, although no
		// merge leads to them; merges alone would give h,e,l -> he,l.
		{"abc", false, []uint32{265}},
		{"hel", false, []uint32{266}},
		{" abc", false, []uint32{32, 97, 98, 99}},
		// The template adds BOS only with addSpecial, even to empty text.
		{"hello", true, []uint32{300, 259}},
		{"", true, []uint32{300}},
		{"", false, []uint32{}},
		// \p{N}{1,3}
		{"12345", false, []uint32{'1', '2', '3', '4', '5'}},
		// Added tokens are cut out before splitting.
		{"hi<|eot|>hi", false, []uint32{'h', 'i', 301, 'h', 'i'}},
		{"<|begin_of_text|>hello", true, []uint32{300, 300, 259}},
		// lstrip and rstrip swallow the spaces around <mask>.
		{"a  <mask>  b", false, []uint32{'a', 302, 'b'}},
		// single_word: [W] only between non-word characters.
		{"x [W] y", false, []uint32{'x', ' ', 303, ' ', 'y'}},
		{"x[W]y", false, []uint32{'x', '[', 'W', ']', 'y'}},
		// A normalized added token matches the NFC form of the text, in either spelling.
		{"I like café!", false, []uint32{'I', ' ', 'l', 'i', 'k', 'e', ' ', 304, '!'}},
		{"I like cafe\u0301!", false, []uint32{'I', ' ', 'l', 'i', 'k', 'e', ' ', 304, '!'}},
	})
	if id, ok := tok.TokenID("<|eot|>"); !ok || id != 301 {
		t.Errorf("TokenID(<|eot|>) = %d, %v, want 301, true", id, ok)
	}
	if _, ok := tok.TokenID("hello"); ok {
		t.Error("TokenID(hello) found a vocabulary entry; want only added tokens")
	}
	if got := tok.VocabSize(); got != 272 {
		t.Errorf("VocabSize() = %d, want 272 (267 vocabulary entries and 5 added tokens)", got)
	}
}

// gpt2Like is a GPT-2-style fixture: a bare ByteLevel pre-tokenizer with its own regex
// and add_prefix_space, no normalizer, no post-processor, merges as pairs, and a model
// without "type".
func gpt2Like(t *testing.T) *Tokenizer {
	t.Helper()
	path := writeFixture(t, map[string]uint32{"Ġh": 256, "Ġhi": 257, "Ġxy": 258}, map[string]string{
		"added_tokens":   `[{"id": 300, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": true}]`,
		"normalizer":     `null`,
		"pre_tokenizer":  `{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true}`,
		"post_processor": `null`,
		"decoder":        `{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`,
		// No "type": old files leave it out of BPE models.
		"model": `{"dropout": null, "unk_token": null, "merges": [["Ġ", "h"], ["Ġh", "i"]]}`,
	})
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestGPT2Like(t *testing.T) {
	tok := gpt2Like(t)
	checkEncode(t, tok, []encodeCase{
		// " hi" merges to Ġhi; " there" has no merges.
		{"hi there", false, []uint32{257, 32, 't', 'h', 'e', 'r', 'e'}},
		{"hi there", true, []uint32{257, 32, 't', 'h', 'e', 'r', 'e'}},
		// Without ignore_merges, Ġxy is not reached.
		{"xy", false, []uint32{32, 'x', 'y'}},
		// Every section gets its prefix space.
		{"hi<|endoftext|>hi", false, []uint32{257, 300, 257}},
		{" hi", false, []uint32{257}},
		{"a  b", false, []uint32{32, 'a', 32, 32, 'b'}},
	})
}

func TestDecode(t *testing.T) {
	tok := llamaLike(t)
	tests := []struct {
		ids  []uint32
		want string
	}{
		{[]uint32{259, 264}, "hello world"},
		{[]uint32{300, 259, 301}, "<|begin_of_text|>hello<|eot|>"},
		{[]uint32{304}, "cafe\u0301"},
		{nil, ""},
		// Bytes that are not UTF-8 become U+FFFD, one per maximal ill-formed part.
		{[]uint32{0xE2, 'a'}, "\ufffda"},
		{[]uint32{0xE2, 0x82}, "\ufffd"},
		{[]uint32{0xF0, 0x9F, 0x98, 'a'}, "\ufffda"},
		{[]uint32{0xC0, 0x80}, "\ufffd\ufffd"},
		{[]uint32{0xED, 0xA0, 0x80}, "\ufffd\ufffd\ufffd"},
		{[]uint32{0xE2, 0x82, 0xAC}, "€"},
	}
	for _, tt := range tests {
		got, err := tok.Decode(tt.ids)
		if err != nil || got != tt.want {
			t.Errorf("Decode(%v) = %q, %v, want %q", tt.ids, got, err, tt.want)
		}
	}
	for _, id := range []uint32{280, 305, 1 << 31} {
		if _, err := tok.Decode([]uint32{'a', id}); !errors.Is(err, ErrUnknownID) || !strings.Contains(err.Error(), fmt.Sprintf("id %d ", id)) {
			t.Errorf("Decode(%d) error = %v, want one naming the id", id, err)
		}
	}
}

func TestUnsupported(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{"wordpiece.json", `model type "WordPiece" is not supported`},
		{"unigram.json", `model type "Unigram" is not supported`},
		{"byte_fallback.json", `BPE with byte_fallback (SentencePiece-style) is not supported`},
		{"metaspace.json", `pre_tokenizer "Metaspace" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "unsupported", tt.file)
			_, err := Load(path)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Load error = %v, want ErrUnsupported", err)
			}
			want := path + ": " + tt.want + ": only byte-level BPE tokenizers (Qwen2/2.5/3, Llama 3.x, GPT-2 style) are; " +
				"without a tokenizer the model uses the router's stand-in vocabulary, whose counts are approximate and whose ids match no engine's"
			if err.Error() != want {
				t.Errorf("Load error\n got %s\nwant %s", err, want)
			}
		})
	}
}

// TestUnsupportedComponents refuses, by name, components around a byte-level BPE model.
func TestUnsupportedComponents(t *testing.T) {
	base := map[string]string{
		"added_tokens":   `[]`,
		"normalizer":     `null`,
		"pre_tokenizer":  `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`,
		"post_processor": `null`,
		"decoder":        `{"type": "ByteLevel"}`,
		"model":          `{"type": "BPE", "merges": []}`,
	}
	tests := []struct {
		field, value, want string
	}{
		{"normalizer", `{"type": "Lowercase"}`, `normalizer "Lowercase" (only NFC is) is not supported`},
		{"normalizer", `{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "NFKC"}]}`, `normalizer "NFKC" (only NFC is) is not supported`},
		{"pre_tokenizer", `{"type": "Whitespace"}`, `pre_tokenizer "Whitespace" is not supported`},
		{"pre_tokenizer", `{"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": false}`, `Split pre-tokenizer with a String pattern is not supported`},
		{"pre_tokenizer", `{"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "MergedWithPrevious", "invert": false}`, `Split pre-tokenizer with behavior "MergedWithPrevious" (only Isolated and Removed are) is not supported`},
		{"pre_tokenizer", `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": false}]}`, `a pre_tokenizer that does not end with ByteLevel is not supported`},
		{"post_processor", `{"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]}`, `post_processor "RobertaProcessing" is not supported`},
		{"decoder", `{"type": "Metaspace"}`, `decoder "Metaspace" is not supported`},
		{"decoder", `null`, `a tokenizer without a ByteLevel decoder is not supported`},
		{"model", `{"type": "BPE", "dropout": 0.1, "merges": []}`, `BPE with dropout is not supported`},
		{"model", `{"type": "WordLevel", "unk_token": "<unk>"}`, `model type "WordLevel" is not supported`},
		{"model", `{"unk_token": "<unk>"}`, `model type "" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			fields := maps.Clone(base)
			fields[tt.field] = tt.value
			_, err := Load(writeFixture(t, nil, fields))
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), ": "+tt.want+": only byte-level BPE") {
				t.Errorf("Load error = %v, want ErrUnsupported saying %q", err, tt.want)
			}
		})
	}
}

// TestMerges loads merge lists that setMerges takes from the scanner, hands to
// encoding/json midway (a three-part merge, whose third part encoding/json drops), or
// refuses: a merge outside the vocabulary, unless a syntax error comes later in the list,
// which is then the error, as when the list was decoded whole.
func TestMerges(t *testing.T) {
	vocab := map[string]uint32{"Ġh": 256, "Ġhi": 257}
	fields := func(merges string) map[string]string {
		return map[string]string{
			"added_tokens":  `[]`,
			"pre_tokenizer": `{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true}`,
			"decoder":       `{"type": "ByteLevel"}`,
			"model":         `{"type": "BPE", "merges": ` + merges + `}`,
		}
	}
	for _, merges := range []string{`[["Ġ", "h"], ["Ġh", "i"]]`, `["Ġ h", "Ġh i"]`, `[["Ġ", "h"], ["Ġh", "i", "x"]]`} {
		tok, err := Load(writeFixture(t, vocab, fields(merges)))
		if err != nil {
			t.Fatalf("merges %s: %v", merges, err)
		}
		if ids, err := tok.Encode(nil, "hi", false); err != nil || !slices.Equal(ids, []uint32{257}) {
			t.Errorf("merges %s: Encode(hi) = %v, %v, want [257]", merges, ids, err)
		}
	}
	for _, tt := range []struct{ merges, want string }{
		{`[["Ġ", "h"], ["h", "x"]]`, `merge 1 ("h" "x"): token not in the vocabulary`},
		{`["Ġ h", "h x", "Ġh  i"]`, `model merges: "Ġh  i" is not two tokens separated by one space`},
	} {
		_, err := Load(writeFixture(t, vocab, fields(tt.merges)))
		if err == nil || !strings.HasSuffix(err.Error(), ": "+tt.want) {
			t.Errorf("merges %s: Load error = %v, want %q", tt.merges, err, tt.want)
		}
	}
}

// TestLoadShared: a tokenizer file is loaded once while it is unchanged, and once more
// after an edit, whose tokenizer then replaces the first in the memo.
func TestLoadShared(t *testing.T) {
	fields := map[string]string{
		"added_tokens":  `[]`,
		"pre_tokenizer": `{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true}`,
		"decoder":       `{"type": "ByteLevel"}`,
		"model":         `{"type": "BPE", "merges": []}`,
	}
	path := writeFixture(t, nil, fields)
	first, err := loadShared(path)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := loadShared(path); err != nil || again != first {
		t.Fatalf("loadShared of the unchanged file = %p, %v, want the first tokenizer %p", again, err, first)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	edited, err := loadShared(path)
	if err != nil || edited == first {
		t.Fatalf("loadShared of the edited file = %p, %v, want a new tokenizer", edited, err)
	}
	loaded.Lock()
	e := loaded.m[path]
	loaded.Unlock()
	if e.tok != edited {
		t.Fatalf("the memo holds %p for the path, want the edited file's %p", e.tok, edited)
	}
}

// TestSizeHint: the hint is a plain file's size, or a gzip file's announced size, which a
// corrupt trailer cannot raise beyond maxGzipRatio times the file.
func TestSizeHint(t *testing.T) {
	dir := t.TempDir()
	var sb strings.Builder
	for i := range 2000 { // entries that compress about as a vocabulary does
		fmt.Fprintf(&sb, `"t%d": %d, `, i*7919%10007, i)
	}
	text := sb.String()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(gz.Bytes())
	copy(corrupt[len(corrupt)-4:], []byte{0xFF, 0xFF, 0xFF, 0xFF})
	for _, tt := range []struct {
		name string
		data []byte
		want int
	}{
		{"plain.json", []byte(text), len(text)},
		{"small.json.gz", gz.Bytes(), len(text)},
		{"corrupt.json.gz", corrupt, maxGzipRatio * len(corrupt)},
	} {
		path := filepath.Join(dir, tt.name)
		if err := os.WriteFile(path, tt.data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := sizeHint(f); got != tt.want {
			t.Errorf("sizeHint(%s) = %d, want %d", tt.name, got, tt.want)
		}
		f.Close()
	}
}
