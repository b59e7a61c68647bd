package dispatch

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// TestStreamBodyPassesBytes checks that a stream reaches the client byte for byte
// whatever its length against the head modifyResponse reads first, and however the
// engine's reads split it, and that a read after the end is still the end.
func TestStreamBodyPassesBytes(t *testing.T) {
	for _, size := range []int{0, 1, streamHead - 1, streamHead, streamHead + 1, 3*streamHead + 7} {
		for _, split := range []string{"whole", "one byte"} {
			want := []byte(strings.Repeat("data: {\"x\":1}\n\n", size/15+1)[:size])
			var engine io.Reader = bytes.NewReader(want)
			if split == "one byte" {
				engine = iotest.OneByteReader(engine)
			}
			sb := streamBodies.Get().(*streamBody)
			sb.body, sb.a = io.NopCloser(engine), &attempt{dl: &deadlines{}}
			n, err := io.ReadAtLeast(sb.body, sb.head[:], 1)
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			sb.end = n
			got, err := io.ReadAll(sb)
			if err != nil {
				t.Fatalf("%d bytes, %s: %v", size, split, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%d bytes, %s: got %d bytes, want %d, first difference at %d", size, split, len(got), len(want), firstDiff(got, want))
			}
			if n, err := sb.Read(make([]byte, 8)); n != 0 || err != io.EOF {
				t.Errorf("%d bytes, %s: a read after the end gave %d, %v", size, split, n, err)
			}
			if err := sb.Close(); err != nil {
				t.Error(err)
			}
			if err := sb.Close(); err == nil {
				t.Errorf("%d bytes, %s: a second Close was accepted, and the reader pooled twice", size, split)
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// isEventStream agrees with mime.ParseMediaType's media type wherever that parses.
func TestIsEventStreamAsParseMediaType(t *testing.T) {
	for _, v := range []string{
		"text/event-stream", "text/event-stream; charset=utf-8", " Text/Event-Stream ;charset=utf-8",
		"TEXT/EVENT-STREAM", "text/event-stream;", "application/json", "application/json; charset=utf-8",
		"text/event-streams", "text/event", "text/plain; x=\"text/event-stream\"",
	} {
		mt, _, err := mime.ParseMediaType(v)
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if got, want := isEventStream(v), mt == "text/event-stream"; got != want {
			t.Errorf("isEventStream(%q) = %v, want %v", v, got, want)
		}
	}
}

// An engine's hop-by-hop headers go however it spells them, and those its Connection
// header names too: removeHopByHop deletes its list's names as they are, so they must be
// canonical, as the answer's keys are.
func TestRemoveHopByHop(t *testing.T) {
	h := http.Header{}
	for _, f := range hopHeaders {
		h.Add(strings.ToLower(f), "x")
	}
	h.Add("connection", "x-private, keep-alive")
	h.Add("x-private", "secret")
	h.Add("content-type", "application/json")
	removeHopByHop(h)
	if want := (http.Header{"Content-Type": {"application/json"}}); !reflect.DeepEqual(h, want) {
		t.Errorf("left %v, want %v", h, want)
	}
}
