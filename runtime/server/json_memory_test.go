package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/request"
)

// Issue 25: a 7.6 MiB chat body whose ignored field "x" holds 4M zeros took a router from
// 27 MB to 1.28 GB. Each entry point that decodes it (the chat endpoint, the completion
// endpoint's generic one-pass decoder, the admin explain probe) now allocates about the
// body's copies: the one read and the one the parse shares strings with, and for explain,
// which hands the body to the chat path, a second read.
func TestIgnoredNumberArrayCostsTheBody(t *testing.T) {
	srv, err := New(plainPlan("E1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	zeros := "[" + strings.Repeat("0,", 4<<20-1) + "0]"
	// A preparer is handed the body the edge read: reading it is a copy of its own.
	prepare := func(f request.Preparer) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			body := make([]byte, r.ContentLength)
			if _, err := io.ReadFull(r.Body, body); err != nil {
				t.Fatal(err)
			}
			if _, err := f(r, body); err != nil {
				t.Errorf("refused: %v", err)
			}
		}
	}
	for _, tc := range []struct {
		name, path, body string
		handle           func(http.ResponseWriter, *http.Request)
		copies           int
	}{
		{"chat", "/v1/chat/completions", chat("m", "hi", `, "x": `+zeros), prepare(srv.current().models.Chat), 2},
		{"completion", "/v1/completions", `{"model":"m","prompt":"hi","x":` + zeros + `}`, prepare(srv.current().models.Completion), 2},
		{"explain", "/admin/explain", chat("m", "hi", `, "x": `+zeros), explainAt(srv.current()), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			w := httptest.NewRecorder()
			got := allocated(func() {
				r, _ := http.NewRequest(http.MethodPost, tc.path, bytes.NewReader(body))
				tc.handle(w, r)
			})
			if w.Code != http.StatusOK {
				t.Fatalf("answered %d: %s", w.Code, w.Body)
			}
			// Each reading of the body may allocate up to preallocMax beyond it.
			if limit := uint64(tc.copies*len(body)) + 2*preallocMax + 1<<20; got > limit {
				t.Errorf("a %d-byte body allocated %d bytes (%.1f a byte), want at most %d", len(body), got, float64(got)/float64(len(body)), limit)
			}
		})
	}
}

// explainAt is srv's POST /admin/explain, as a loopback-only router serves it.
func explainAt(srv *generation) http.HandlerFunc {
	srv.loopbackOnly.Store(true)
	return srv.Handler().ServeHTTP
}
