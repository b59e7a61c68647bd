package apikey

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

func keySet(keys ...string) *Set {
	a := &plan.Auth{}
	for _, k := range keys {
		a.Keys = append(a.Keys, plan.DigestKey(k))
	}
	return New(a)
}

func TestAllowsEveryKeyAndNothingElse(t *testing.T) {
	s := keySet("sk-one", "sk-two", "sk-three")
	for _, k := range []string{"sk-one", "sk-two", "sk-three"} {
		if !s.Allows(k) {
			t.Errorf("key %q refused", k)
		}
	}
	for _, k := range []string{"", "sk-on", "sk-one ", "SK-ONE", "sk-onesk-two"} {
		if s.Allows(k) {
			t.Errorf("key %q allowed", k)
		}
	}
	if keySet().Allows("") {
		t.Error("an empty set allowed the empty key")
	}
}

// TestRequire serves through a real listener: which paths need a key, how a refusal
// looks, and that the refusal never echoes the key sent.
func TestRequire(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "served "+r.URL.Path) })
	srv := httptest.NewServer(Require(keySet("sk-good", "sk-other"), inner))
	defer srv.Close()
	call := func(path, auth string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/v1/chat/completions", "", 401},
		{"/v1/chat/completions", "Bearer sk-bad-guess", 401},
		{"/v1/chat/completions", "Basic c2stZ29vZA==", 401},
		{"/v1/chat/completions", "Bearer ", 401},
		{"/v1/chat/completions", "Bearer sk-good", 200},
		{"/v1/chat/completions", "bearer   sk-other", 200},
		{"/v1/models", "", 401},
		{"/metrics", "", 401},
		{"/healthz", "", 200},
		{"/health", "", 200},
		{"/readyz", "", 200},
		{"/liveness", "", 200},
		{"/readiness", "", 200},
		{"/admin/state", "", 200},        // admin_token guards it, not a client key
		{"/admin/../v1/models", "", 401}, // not a clean admin path
		{"/admin//x/../../v1/models", "", 401},
		{"/healthz/", "", 401},
	} {
		resp, body := call(tc.path, tc.auth)
		if resp.StatusCode != tc.want {
			t.Errorf("%s with %q: %d, want %d (%s)", tc.path, tc.auth, resp.StatusCode, tc.want, body)
			continue
		}
		if tc.want != 401 {
			continue
		}
		if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q", tc.path, got)
		}
		var e struct {
			Error struct{ Message, Type, Code string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Fatalf("%s: body %q: %v", tc.path, body, err)
		}
		if e.Error.Type != "invalid_request_error" || e.Error.Code != "invalid_api_key" || e.Error.Message == "" {
			t.Errorf("%s: error %+v, want OpenAI's invalid_api_key", tc.path, e.Error)
		}
		if strings.Contains(body, "sk-bad-guess") {
			t.Errorf("the refusal echoes the key: %s", body)
		}
	}
}

// BenchmarkAllows is the cost of checking one presented key against a set of 1 and of 64
// keys: one SHA-256 and a constant-time compare per key.
func BenchmarkAllows(b *testing.B) {
	for _, n := range []int{1, 64} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("sk-%040d", i)
		}
		s := keySet(keys...)
		b.Run(fmt.Sprintf("%dkeys", n), func(b *testing.B) {
			for b.Loop() {
				if !s.Allows(keys[n-1]) {
					b.Fatal("refused")
				}
			}
		})
	}
}
