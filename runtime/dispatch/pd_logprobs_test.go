package dispatch

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestLogprobEventsSplitReads: events arriving a byte at a time are merged one by one;
// an event without the list, [DONE] and an unfinished last event pass as they are.
func TestLogprobEventsSplitReads(t *testing.T) {
	in := `data: {"text":"a","meta_info":{"id":"x","input_token_logprobs":[]}}` + "\n\n" +
		`data: {"text":"ab","meta_info":{"id":"x","input_token_logprobs":[[-1,9,null]]}}` + "\n\n" +
		`data: {"text":"ab"}` + "\n\n" + "data: [DONE]\n\n" + "data: {cut"
	l := &logprobEvents{src: io.NopCloser(iotest.OneByteReader(strings.NewReader(in))), pre: []byte(`[[null,1,null],[-0.5,2,null]]`)}
	got, err := io.ReadAll(l)
	if err != nil {
		t.Fatal(err)
	}
	want := `data: {"meta_info":{"id":"x","input_token_logprobs":[[null,1,null],[-0.5,2,null]]},"text":"a"}` + "\n\n" +
		`data: {"meta_info":{"id":"x","input_token_logprobs":[[null,1,null],[-0.5,2,null],[-1,9,null]]},"text":"ab"}` + "\n\n" +
		`data: {"text":"ab"}` + "\n\n" + "data: [DONE]\n\n" + "data: {cut"
	if string(got) != want {
		t.Errorf("merged stream:\n%s\nwant:\n%s", got, want)
	}
}

// TestLogprobEventsBounded: an event longer than maxLogprobEvent is not held whole: it
// passes unmerged once the bound is reached (held whole, it would have been merged).
func TestLogprobEventsBounded(t *testing.T) {
	long := `data: {"meta_info":{"input_token_logprobs":[]},"text":"` + strings.Repeat("x", 2*maxLogprobEvent) + "\"}\n\n"
	l := &logprobEvents{src: io.NopCloser(strings.NewReader(long)), pre: []byte(`[[null,1,null]]`)}
	got, err := io.ReadAll(l)
	if err != nil || string(got) != long {
		t.Errorf("oversized event: %v, %d bytes, changed: %v", err, len(got), string(got) != long)
	}
}
