package token

import (
	"slices"
	"strings"
	"testing"
)

// pieces splits text the way Encode does, so tests can state expectations as strings.
func pieces(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := pieceEnd(text, i)
		out = append(out, text[i:j])
		i = j
	}
	return out
}

func TestPieces(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{"empty", "", nil},
		{"words and punctuation", "Hello, world!", []string{"Hello", ", ", "world", "!"}},
		{"leading whitespace", "  hi", []string{"  ", "hi"}},
		{"whitespace runs stay with the piece before", "a\n\n b\t", []string{"a\n\n ", "b\t"}},
		{"digits and underscores are word characters", "x_1 = 42;", []string{"x_1 ", "= ", "42", ";"}},
		{"long words are cut", strings.Repeat("a", 30), []string{strings.Repeat("a", 12), strings.Repeat("a", 12), strings.Repeat("a", 6)}},
		{"unicode letters", "héllo wörld", []string{"héllo ", "wörld"}},
		{"long unicode words cut on rune boundaries", strings.Repeat("é", 7), []string{strings.Repeat("é", 6), "é"}},
		{"symbols are single pieces", "<|>", []string{"<", "|", ">"}},
		{"emoji", "ok 👍👍", []string{"ok ", "👍", "👍"}},
		{"unicode space", "a\u00a0b", []string{"a\u00a0", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pieces(tt.text)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("pieces(%q) = %q, want %q", tt.text, got, tt.want)
			}
			ids := Encode(tt.text)
			if len(ids) != len(tt.want) || Count(tt.text) != len(tt.want) {
				t.Fatalf("Encode gave %d ids, Count %d, want %d", len(ids), Count(tt.text), len(tt.want))
			}
			for i, p := range tt.want {
				if ids[i] != hash(p) {
					t.Errorf("id %d = %d, want hash(%q) = %d", i, ids[i], p, hash(p))
				}
			}
		})
	}
}

func TestHashIsFNV1a(t *testing.T) {
	// Published FNV-1a 32-bit test vectors.
	for s, want := range map[string]uint32{"": 0x811c9dc5, "a": 0xe40c292c, "foobar": 0xbf9cf968} {
		if got := hash(s); got != want {
			t.Errorf("hash(%q) = %#x, want %#x", s, got, want)
		}
	}
}

func TestEncodeIsPrefixStable(t *testing.T) {
	base := "You are a helpful assistant. "
	long := base + "Summarise the following text, please."
	if !slices.Equal(Encode(long)[:Count(base)], Encode(base)) {
		t.Fatal("the ids of a text are not a prefix of the ids of its continuation")
	}
	if slices.Equal(Encode("the cat"), Encode("the dog")) {
		t.Fatal("different texts gave the same ids")
	}
}

func TestEncodeChat(t *testing.T) {
	conv := []Message{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "What is 2+2?"},
		{Role: "assistant", Content: "4"},
		{Role: "user", Content: "And 3+3?"},
	}
	full := EncodeChat(conv)
	if len(full) != CountChat(conv) {
		t.Fatalf("CountChat = %d, len(EncodeChat) = %d", CountChat(conv), len(full))
	}
	for k := range conv {
		prefix := EncodeChat(conv[:k])
		if !slices.Equal(full[:len(prefix)], prefix) {
			t.Fatalf("the first %d messages do not encode to a prefix of the conversation", k)
		}
	}
	want := []uint32{imStart}
	want = append(want, Encode("system")...)
	want = append(want, newline)
	want = append(want, Encode("Be brief.")...)
	want = append(want, imEnd)
	if got := EncodeChat(conv[:1]); !slices.Equal(got, want) {
		t.Fatalf("EncodeChat(system) = %v, want %v", got, want)
	}
	// The role is part of the template: the same text under another role differs.
	if slices.Equal(EncodeChat([]Message{{Role: "user", Content: "x"}}), EncodeChat([]Message{{Role: "system", Content: "x"}})) {
		t.Fatal("role does not change the ids")
	}
}
