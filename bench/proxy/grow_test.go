package proxy

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestGrow checks that each long_grow body is the previous one's conversation plus an
// assistant answer and a new user turn, and that the conversation starts again from its
// history after growTurns exchanges.
func TestGrow(t *testing.T) {
	type msg struct{ Role, Content string }
	messages := func(body []byte) []msg {
		var req struct {
			Model    string
			Messages []msg
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Model != "m" {
			t.Fatalf("body is not a chat request for m: %v", err)
		}
		return req.Messages
	}
	kind := Grow([]byte("Some prose with \"quotes\" and more words.\n"), 2000)
	history := messages(kind.Body)
	prev := history
	for i := range growTurns + 1 {
		got := messages(kind.Next())
		want := prev
		if i == growTurns {
			want = history
		}
		if len(got) != len(want)+2 || !slices.Equal(got[:len(want)], want) {
			t.Fatalf("request %d: %d messages, not the %d before it plus an exchange", i+1, len(got), len(want))
		}
		if last := got[len(got)-1]; last.Role != "user" || slices.Contains(prev, last) || got[len(got)-2].Role != "assistant" {
			t.Fatalf("request %d ends with %q then %q, not an answer and a new user turn", i+1, got[len(got)-2].Role, last.Role)
		}
		prev = got
	}
}
