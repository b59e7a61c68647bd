package token

import (
	"encoding/json"
	"testing"
)

// TestMessageContentFastPath: content decoded without a second pass is exactly what
// encoding/json gives, for plain text and for everything that needs decoding.
func TestMessageContentFastPath(t *testing.T) {
	for _, lit := range []string{
		`""`, `"plain text"`, `"héllo 世界"`, `"tab\there"`, `"quote \" inside"`, `"\u00e9"`,
		`"back\\slash"`, "\"bad \xff utf8\"", `"emoji 😀"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		var m Message
		if err := json.Unmarshal([]byte(`{"role":"user","content":`+lit+`}`), &m); err != nil {
			t.Fatalf("%s: %v", lit, err)
		}
		if m.Content != want {
			t.Errorf("%s: content %q, want %q", lit, m.Content, want)
		}
	}
	if _, ok := plainString([]byte(`"a\nb"`)); ok {
		t.Error("an escape took the fast path")
	}
	if s, ok := plainString([]byte(`"ab"`)); !ok || s != "ab" {
		t.Errorf("plain literal: %q %v", s, ok)
	}
}
