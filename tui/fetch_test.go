package tui

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHTTPFetch runs the fetcher against a real HTTP server answering as the router does.
func TestHTTPFetch(t *testing.T) {
	const token = "t0ken"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/admin/state" {
			http.NotFound(w, r)
			return
		}
		switch r.Header.Get("Authorization") {
		case "Bearer " + token:
		case "Bearer broken":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error": {"message": "gathering metrics: boom", "type": "internal_error", "code": "internal"}}`))
			return
		case "Bearer dirty":
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(`{"error": {"message": "boom\u001b[2J\nagain"}}`))
			return
		case "Bearer html":
			w.Write([]byte("<html>not a router</html>"))
			return
		case "Bearer null":
			w.Write([]byte("null"))
			return
		default:
			w.Header().Set("x-router-error-code", "unauthorized")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error": {"message": "admin endpoints need Authorization: Bearer <admin_token>"}}`))
			return
		}
		w.Write([]byte(`{"time": "2026-01-02T15:04:05Z", "engines": [{"id": "E1", "healthy": true}]}`))
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	tests := []struct {
		name    string
		base    string
		token   string
		wantErr error
		wantMsg string
	}{
		{name: "ok", base: srv.URL + "/", token: token},
		{name: "no token", base: srv.URL, wantErr: ErrUnauthorized, wantMsg: "401 unauthorized: the router requires an admin token"},
		{name: "wrong token", base: srv.URL, token: "wrong", wantErr: ErrUnauthorized, wantMsg: "401 unauthorized: the router refused the admin token"},
		{name: "server error", base: srv.URL, token: "broken", wantMsg: "/admin/state: 500 Internal Server Error: gathering metrics: boom"},
		{name: "control characters", base: srv.URL, token: "dirty", wantMsg: "/admin/state: 502 Bad Gateway: boom\uFFFD[2J\uFFFDagain"},
		{name: "not json", base: srv.URL, token: "html", wantErr: ErrMalformed, wantMsg: "/admin/state: malformed snapshot: invalid character '<'"},
		{name: "null", base: srv.URL, token: "null", wantErr: ErrMalformed, wantMsg: "malformed snapshot: null instead of an object"},
		{name: "unreachable", base: closed.URL, wantErr: ErrUnreachable, wantMsg: "cannot reach " + closed.URL + ": dial tcp"},
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := HTTPFetch(client, tt.base, tt.token)(context.Background())
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Engines) != 1 || st.Engines[0].ID != "E1" {
					t.Errorf("snapshot = %+v", st)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantMsg)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v is not %v", err, tt.wantErr)
			}
		})
	}
}
