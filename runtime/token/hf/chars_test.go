package hf

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// withoutChars returns a copy of t whose merging starts from bytes alone.
func withoutChars(t *Tokenizer) *Tokenizer {
	c := uncached(t)
	m := *t.model
	m.chars = nil
	c.model = &m
	return c
}

// TestCharTable: Qwen's table holds most of the Chinese characters of the documents, and
// only characters of two or three bytes that are one token.
func TestCharTable(t *testing.T) {
	tok := loadQwen(t)
	ct := tok.model.chars
	if ct == nil {
		t.Fatal("Qwen has no table of whole characters")
	}
	held, all := 0, 0
	for _, r := range readText(t, "cjk") {
		if r < utf8.RuneSelf {
			continue
		}
		all++
		id, _, ok := ct.get(r)
		if !ok {
			continue
		}
		held++
		if want, _ := tok.model.whole.get(string(r)); id != want {
			t.Errorf("the table gives %q id %d, the table of whole tokens %d", r, id, want)
		}
	}
	if held*100 < all*95 {
		t.Errorf("the table holds %d of the document's %d characters of several bytes, want 95%% or more", held, all)
	}
	for _, r := range []rune{'a', 0x7F, '😀', 0x10000, utf8.MaxRune} {
		if _, _, ok := ct.get(r); ok {
			t.Errorf("the table holds %U, which is not two or three bytes", r)
		}
	}
	if withoutChars(tok).model.chars != nil {
		t.Fatal("withoutChars kept the table")
	}
}

// charsAlphabet returns pieces to build pre-tokens from: characters the table holds,
// Chinese characters it does not, letters of one and two bytes, spaces, punctuation,
// digits, an emoji, invalid bytes and the first bytes of a Chinese character.
func charsAlphabet(t testing.TB, m *model) []string {
	held, other := []string{}, []string{}
	for r := rune(0x4E00); r < 0xA000 && (len(held) < 200 || len(other) < 100); r += 7 {
		if _, ruled, ok := m.chars.get(r); ok && ruled == "" {
			held = append(held, string(r))
		} else {
			other = append(other, string(r))
		}
	}
	if len(held) < 100 || len(other) < 50 {
		t.Fatalf("%d held and %d other Chinese characters, want 100 and 50", len(held), len(other))
	}
	for _, s := range strings.Fields("的 是 一 不 了 人 我 在 有 他 这 中 大 来 上 国 个 到 说 们") {
		held = append(held, s, s, s) // frequent ones, often in tokens of two characters
	}
	alphabet := append(held, other[:50]...)
	return append(alphabet, "a", "e", "é", "ö", "я", "한", "글", "あ", "ア", " ", "，", "。", "、",
		"1", "２", "😀", "\xff", "\xe4\xb8", "\x80", "\n", "「", "'")
}

// TestCharsExact merges pre-tokens of Chinese text mixed with other characters with and
// without the table, by each merge loop and by the textbook scan of bytes.
func TestCharsExact(t *testing.T) {
	m := loadQwen(t).model
	plain := *m
	plain.chars = nil
	alphabet := charsAlphabet(t, m)
	r := rand.New(rand.NewPCG(5, 6))
	var buf bpeBuf
	for i := range 2000 {
		var b strings.Builder
		for n := 1 + r.IntN([]int{6, 30, 200, 1500}[i%4]); n > 0; n-- {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		w := b.String()
		var want []uint32
		if len(w) <= 1000 {
			want = scanMerge(&plain, plain.premerge(nil, w))
		} else {
			want, _ = plain.mergeHeap(nil, w, &buf, nil) // the scan is quadratic
		}
		if got, _ := m.merge(nil, w, &buf, nil); !slices.Equal(got, want) {
			t.Fatalf("merge(%q) = %v with the table, the scan of its bytes %v", w, got, want)
		}
		if got, _ := m.mergeHeap(nil, w, &buf, nil); !slices.Equal(got, want) {
			t.Fatalf("mergeHeap(%q) = %v with the table, the scan of its bytes %v", w, got, want)
		}
		if got, _ := m.mergeRanks(nil, w, &buf, nil); !slices.Equal(got, want) {
			t.Fatalf("mergeRanks(%q) = %v with the table, the scan of its bytes %v", w, got, want)
		}
		if len(w) < 64 {
			if got := m.mergeScan(nil, w, &buf); !slices.Equal(got, want) {
				t.Fatalf("mergeScan(%q) = %v with the table, the scan of its bytes %v", w, got, want)
			}
		}
	}
	// The documents, split as Qwen splits them.
	tok := uncached(loadQwen(t))
	plainTok := withoutChars(tok)
	for _, doc := range []string{"cjk", "prose", "code"} {
		text := readText(t, doc)
		if got, want := tok.encodeAll(text, false), plainTok.encodeAll(text, false); !slices.Equal(got, want) {
			t.Errorf("Encode of %s.txt differs with the table", doc)
		}
	}
}

// TestPremergeNeighbours: a held character is taken whole only between letters or the
// ends of the pre-token, and a character that is not held keeps its bytes.
func TestPremergeNeighbours(t *testing.T) {
	m := loadQwen(t).model
	var held, other string
	for r := rune(0x4E00); held == "" || other == ""; r++ {
		if _, ruled, ok := m.chars.get(r); ok && ruled == "" && held == "" {
			held = string(r)
		} else if !ok && other == "" {
			other = string(r)
		}
	}
	id, _, _ := m.chars.get([]rune(held)[0])
	bytes := func(s string) []uint32 {
		var ids []uint32
		for i := range len(s) {
			ids = append(ids, m.byteID[s[i]])
		}
		return ids
	}
	comma := bytes("，")
	if id, _, ok := m.chars.get('，'); ok {
		comma = []uint32{id}
	}
	cat := func(parts ...[]uint32) []uint32 { return slices.Concat(parts...) }
	for _, c := range []struct {
		p    string
		want []uint32
	}{
		{held, []uint32{id}},
		{held + held, []uint32{id, id}},
		{"a" + held + "b", cat(bytes("a"), []uint32{id}, bytes("b"))},
		{other, bytes(other)},
		{other + held, cat(bytes(other), []uint32{id})}, // other is a letter too
		{" " + held, cat(bytes(" "), bytes(held))},
		{held + "!", cat(bytes(held), bytes("!"))},
		{" " + held + "，", cat(bytes(" "+held), comma)}, // "，" is held too
		{held + "\xff", cat(bytes(held), bytes("\xff"))},
		{"\xe4" + held, cat(bytes("\xe4"), bytes(held))},
		{held + "1" + held, cat(bytes(held), bytes("1"), bytes(held))},
	} {
		if got := m.premerge(nil, c.p); !slices.Equal(got, c.want) {
			t.Errorf("premerge(%q) = %v, want %v", c.p, got, c.want)
		}
	}
}

// FuzzCharsExact compares merging with and without the table of whole characters on the
// fuzzer's text as one pre-token, whatever its characters, and Encode of it.
func FuzzCharsExact(f *testing.F) {
	for _, s := range []string{"你好世界", "第一章　海边的小镇", "那年冬天，海边的小镇醒得很慢。", "한국어 텍스트", "日本語のテキスト",
		"中文abc中文", "中\xff文", "\xe4\xb8中", "混合 mixed 文本 😀 123", "我你除了", "很다都数什장"} {
		f.Add(s)
	}
	tok := uncached(loadQwen(f))
	plainTok := withoutChars(tok)
	m, plain := tok.model, plainTok.model
	f.Fuzz(func(t *testing.T, s string) {
		s = s[:min(len(s), 2048)]
		if s == "" {
			return
		}
		var buf bpeBuf
		want, _ := plain.merge(nil, s, &buf, nil)
		if got, _ := m.merge(nil, s, &buf, nil); !slices.Equal(got, want) {
			t.Fatalf("merge(%+q) = %v with the table, %v without", s, got, want)
		}
		if got, _ := m.mergeHeap(nil, s, &buf, nil); !slices.Equal(got, want) {
			t.Fatalf("mergeHeap(%+q) = %v with the table, %v without", s, got, want)
		}
		if got, want := tok.encodeAll(s, false), plainTok.encodeAll(s, false); !slices.Equal(got, want) {
			t.Fatalf("Encode(%+q) = %v with the table, %v without", s, got, want)
		}
	})
}

// TestCharsExactDeepSeek compares encoding with and without the table of whole
// characters with DeepSeek-V3's vocabulary, whose pre-tokenizer is not Qwen's, on the
// documents and on Chinese text mixed with other characters.
func TestCharsExactDeepSeek(t *testing.T) {
	tok, err := Load("../../../testdata/tokenizers/deepseek_v3/tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	if tok.model.chars == nil {
		t.Fatal("DeepSeek-V3 has no table of whole characters")
	}
	tok = uncached(tok)
	plain := withoutChars(tok)
	texts := []string{readText(t, "cjk"), readText(t, "prose"), readText(t, "code")}
	alphabet := charsAlphabet(t, tok.model)
	r := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		var b strings.Builder
		for n := 1 + r.IntN(400); n > 0; n-- {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		if got, want := tok.encodeAll(s, false), plain.encodeAll(s, false); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v with the table, %v without", s[:min(len(s), 200)], got, want)
		}
	}
}

// TestCharRules merges, with and without the table, each character held with rules
// between letters that meet each of its rules, and between letters that meet none; and
// shows that the rules matter: without them, merging differs for some of those texts.
func TestCharRules(t *testing.T) {
	m := loadQwen(t).model
	plain := *m
	plain.chars = nil
	noRules := *m
	nr := *m.chars
	nr.ruled = slices.Clone(nr.ruled)
	for i := range nr.ruled {
		nr.ruled[i].end = nr.ruled[i].start
	}
	noRules.chars = &nr
	var safe []string // letters held everywhere
	for r := rune(0x4E00); len(safe) < 50; r += 97 {
		if _, rules, ok := m.chars.get(r); ok && rules == "" {
			safe = append(safe, string(r))
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	letters := func() string { return safe[rng.IntN(len(safe))] + safe[rng.IntN(len(safe))] }
	var buf bpeBuf
	check := func(w string) (rulesMatter bool) {
		want := scanMerge(&plain, plain.premerge(nil, w))
		if got, _ := m.merge(nil, w, &buf, nil); !slices.Equal(got, want) {
			t.Fatalf("merge(%q) = %v with the table, the scan of its bytes %v", w, got, want)
		}
		got, _ := noRules.merge(nil, w, &buf, nil)
		return !slices.Equal(got, want)
	}
	ruled, matter := 0, 0
	for r := range rune(1 << 16) {
		_, rules, ok := m.chars.get(r)
		if !ok || rules == "" {
			continue
		}
		ruled++
		c := string(r)
		check(letters() + c + letters())
		for len(rules) > 0 {
			var s string
			var after bool
			s, after, rules = nextRule(rules)
			w := letters() + s + c + letters()
			if after {
				w = letters() + c + s + letters()
			}
			if check(w) {
				matter++
			}
		}
	}
	t.Logf("%d characters held with rules, whose rules changed merging %d times", ruled, matter)
	if ruled < 1000 || matter == 0 {
		t.Fatalf("%d characters held with rules, whose rules changed merging %d times; want 1000 and some", ruled, matter)
	}
}
