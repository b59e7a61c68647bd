package server

import (
	"net/http"
	"testing"
	"time"
)

// The Date header is formatted once a second, as RFC 9110's IMF-fixdate in GMT, and a
// response that adds to its header cannot change the shared value.
func TestResponseDate(t *testing.T) {
	var d dateHeader
	at := time.Date(2026, 12, 3, 8, 14, 49, 100, time.FixedZone("CET", 3600))
	v := d.at(at)
	if len(v) != 1 || v[0] != "Thu, 03 Dec 2026 07:14:49 GMT" {
		t.Fatalf("Date %q", v)
	}
	h := http.Header{"Date": d.at(at.Add(800 * time.Millisecond))}
	h.Add("Date", "another")
	if again := d.at(at.Add(900 * time.Millisecond)); len(again) != 1 || again[0] != v[0] {
		t.Fatalf("the shared value changed: %q", again)
	}
	if next := d.at(at.Add(time.Second)); next[0] != "Thu, 03 Dec 2026 07:14:50 GMT" {
		t.Fatalf("next second: %q", next)
	}
}
