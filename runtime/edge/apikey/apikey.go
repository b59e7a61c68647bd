// Package apikey authenticates clients by API key, as OpenAI's SDKs send one
// (Authorization: Bearer KEY). It wraps the serving handler and never looks past the
// request's headers and path: selection and dispatch know nothing of it.
//
// Keys are held as SHA-256 digests (plan.Auth) and a presented key is hashed and compared
// with every digest in constant time, so neither the comparison nor the order of the keys
// tells a client how close its guess was, and no key is kept in memory to be dumped.
package apikey

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"path"
	"strings"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/plan"
)

// CodeInvalidAPIKey is the error code of a refused request, OpenAI's.
const CodeInvalidAPIKey = "invalid_api_key"

// Set is the accepted keys.
type Set struct {
	digests []plan.KeyDigest
}

// New is the set of a's keys.
func New(a *plan.Auth) *Set { return &Set{digests: a.Keys} }

// Allows reports whether key is one of the set's. It hashes key and compares the digest
// with every key's, all of them whatever matches, in constant time.
func (s *Set) Allows(key string) bool {
	d := sha256.Sum256([]byte(key))
	ok := 0
	for _, k := range s.digests {
		ok |= subtle.ConstantTimeCompare(d[:], k[:])
	}
	return ok == 1
}

// open are the paths served without a key: the health checks, which load balancers and
// Kubernetes probes call without credentials and which tell nothing of the fleet.
var open = map[string]bool{
	"/healthz": true, "/health": true, "/readyz": true, "/liveness": true, "/readiness": true,
}

// Exempt reports whether a request to p needs no client key: a health check, or an admin
// endpoint, which admin_token guards instead. A client key never opens the admin
// endpoints, and admin_token is not a client key. A path that is not clean (with .. or
// //) is never exempt: the mux would answer it with a redirect, and "/admin/../v1/..."
// must not slip past as an admin path.
func Exempt(p string) bool {
	return open[p] || (strings.HasPrefix(p, "/admin/") && path.Clean(p) == p)
}

// Require serves next only for requests with a key of s, or to an Exempt path; others get
// 401 with an OpenAI-shaped error (code invalid_api_key) and WWW-Authenticate: Bearer.
func Require(s *Set, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Exempt(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		key, ok := Bearer(r.Header.Get("Authorization"))
		if ok && s.Allows(key) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="router"`)
		msg := "missing API key: send Authorization: Bearer KEY with KEY one of the router's client keys (auth in its config)"
		if ok {
			// The key is never echoed: it may be a real key of another service.
			msg = "incorrect API key provided: the router accepts only the keys of its config (auth); check the key your client sends"
		}
		answer.Write(w, http.StatusUnauthorized, CodeInvalidAPIKey, msg)
	})
}

// Bearer returns the credentials of a Bearer authorization, client keys' and
// admin_token's alike; the scheme is case-insensitive (RFC 9110 §11.1) and may be
// followed by several spaces. Empty credentials are none.
func Bearer(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimLeft(cred, " ")
	return cred, cred != ""
}
