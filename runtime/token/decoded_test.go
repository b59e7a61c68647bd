package token

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestStandinUsesDecodedMessages: a caller that decoded the messages already passes them,
// and the stand-in tokenizes them without reading Messages again.
func TestStandinUsesDecodedMessages(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "hello there"}}
	got, err := Standin{}.EncodeChat(nil, Chat{Messages: json.RawMessage(`not json`), Decoded: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, EncodeChat(msgs)) {
		t.Fatal("decoded messages not used")
	}
	if _, err := (Standin{}).EncodeChat(nil, Chat{Messages: json.RawMessage(`not json`)}); err == nil {
		t.Fatal("without Decoded the raw messages must be decoded")
	}
}

// TestCheckDecodedMatchesCheckMessages: both report the same problems in the same words.
func TestCheckDecodedMatchesCheckMessages(t *testing.T) {
	for _, raw := range []string{`[{"role":"user","content":"x"}]`, `[]`, `null`, `[{"content":"x"}]`, `[{"role":1}]`, `{"role":"user"}`} {
		var msgs []Message
		a, b := CheckMessages(json.RawMessage(raw)), CheckDecoded(json.RawMessage(raw), msgs, json.Unmarshal([]byte(raw), &msgs))
		if (a == nil) != (b == nil) || a != nil && a.Error() != b.Error() {
			t.Errorf("%s: CheckMessages %v, CheckDecoded %v", raw, a, b)
		}
	}
}
