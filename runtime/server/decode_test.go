package server

import (
	"strings"
	"testing"
)

// TestDecodeChatOnePass: the bodies clients send are decoded in the one pass (messages
// and parsed fields come back), and bodies it refuses get the strict decoder's error.
func TestDecodeChatOnePass(t *testing.T) {
	for _, body := range fuzzSeeds[:1] {
		if _, msgs, parsed, herr := decodeChat([]byte(body)); herr != nil || msgs == nil || parsed == nil || parsed.Messages == nil {
			t.Errorf("%s: not decoded in one pass (error %v)", body, herr)
		}
	}
	if _, msgs, _, herr := decodeChat(longChat(1 << 10)); herr != nil || len(msgs) < 2 {
		t.Errorf("long chat: not decoded in one pass (error %v)", herr)
	}
	for body, want := range map[string]string{
		`{"model":"m","MODEL":"x","messages":[{"role":"user"}]}`:   `key "MODEL" in the top-level object: keys are case-sensitive, did you mean "model"?`,
		`{"model":"m","messages":[{"role":"user","role":"x"}]}`:    `duplicate key "role" in messages[0]`,
		`{"model":"m","messages":[{"role":"u"}],"max_tokens":"1"}`: `max_tokens: expected int64, got JSON string`,
		`{"model":"m","temperaturE":1,"messages":[{"role":"u"}]}`:  `did you mean "temperature"`,
		`{"model":"m","messages":[{"role":"u"}]`:                   `request body is not a JSON object`,
	} {
		_, _, _, herr := decodeChat([]byte(body))
		if herr == nil || !strings.Contains(herr.msg, want) {
			t.Errorf("%s: error %v, want it to contain %q", body, herr, want)
		}
	}
}
