package server

import (
	"net/http"
	"strings"
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

// A request without a usable X-Request-Id gets a new id of 24 hex digits, a different
// one each time; a client's short token is kept.
func TestRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := requestID(&http.Request{Header: http.Header{}})
		if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %q given twice", id)
		}
		seen[id] = true
	}
	if id := requestID(&http.Request{Header: http.Header{"X-Request-Id": {"client-7.a:b_c"}}}); id != "client-7.a:b_c" {
		t.Fatalf("the client's id was replaced by %q", id)
	}
	if id := requestID(&http.Request{Header: http.Header{"X-Request-Id": {"has space"}}}); id == "has space" || len(id) != 24 {
		t.Fatalf("a client id that is not a token was kept: %q", id)
	}
}
