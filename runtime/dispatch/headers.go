package dispatch

import (
	"net"
	"net/http"
	"strings"

	"github.com/routerkit/router/runtime/plan"
)

// neverForwarded are client headers no engine gets, whatever the config: hop-by-hop
// headers (RFC 9110 §7.6.1), credentials meant for the router's own origin (Cookie), and
// headers the router sets itself for the body it sends.
var neverForwarded = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Cookie", "Host", "Content-Length", "Content-Type", "Content-Encoding", "Expect",
	// The router reads non-streamed answers to check them, so it asks engines for
	// identity (see apply) whatever the client accepts.
	"Accept-Encoding",
	"X-Request-Id", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
}

// HeaderPolicy is the one rule for the client headers both PD halves and plain engines
// get: everything but neverForwarded, the headers named by Connection and the config's
// deny list; or, when the config has an allow list, only those.
type HeaderPolicy struct {
	allow map[string]bool // nil: all but denied
	deny  map[string]bool
}

// NewHeaderPolicy is the header policy of the plan's headers section.
func NewHeaderPolicy(p plan.HeaderPolicy) HeaderPolicy {
	hp := HeaderPolicy{deny: map[string]bool{}}
	for _, h := range neverForwarded {
		hp.deny[h] = true
	}
	for _, h := range p.Deny {
		hp.deny[http.CanonicalHeaderKey(h)] = true
	}
	if len(p.Allow) > 0 {
		hp.allow = map[string]bool{}
		for _, h := range p.Allow {
			hp.allow[http.CanonicalHeaderKey(h)] = true
		}
	}
	return hp
}

// Outbound returns the headers an engine gets for a client request with id reqID.
func (hp HeaderPolicy) Outbound(in http.Header, reqID string) http.Header {
	out := in.Clone()
	if out == nil {
		out = http.Header{}
	}
	hp.apply(out, reqID)
	return out
}

// apply turns a copy of a client request's headers into the headers an engine gets for
// the request with id reqID, in place. The proxy applies it to the copy of the client's
// request it makes for the engine anyway, so that a dispatch copies the headers once.
func (hp HeaderPolicy) apply(h http.Header, reqID string) {
	var named map[string]bool
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if named == nil {
				named = map[string]bool{}
			}
			named[http.CanonicalHeaderKey(strings.TrimSpace(f))] = true
		}
	}
	for k := range h {
		if hp.deny[k] || named[k] || (hp.allow != nil && !hp.allow[k]) {
			delete(h, k)
		}
	}
	// One allocation for the three values. Asking for identity spares the router
	// inflating what it must read anyway (an engine next to it gains nothing from
	// compressing) and the transport the header it would otherwise add for gzip.
	vals := []string{"application/json", reqID, "identity"}
	h["Content-Type"], h["X-Request-Id"], h["Accept-Encoding"] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
}

// setForwarded adds the X-Forwarded-For, -Host and -Proto headers for in, as
// httputil.ProxyRequest.SetXForwarded does for a request without forwarding headers of
// its own (the client's are never forwarded), so both PD halves and plain engines see
// the same request. The three values share one allocation.
func setForwarded(h http.Header, in *http.Request) {
	vals := make([]string, 3)
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		vals[0] = ip
		h["X-Forwarded-For"] = vals[0:1:1]
	}
	vals[1] = in.Host
	h["X-Forwarded-Host"] = vals[1:2:2]
	vals[2] = "http"
	if in.TLS != nil {
		vals[2] = "https"
	}
	h["X-Forwarded-Proto"] = vals[2:3:3]
}

// clientResponseHeaders are the engine response headers a client gets. Anything else
// (Set-Cookie, Server, Location, engine-internal headers) stays with the router: a
// client talks to the router, not to the engine behind it.
var clientResponseHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true,
	"Cache-Control": true, "X-Accel-Buffering": true, "Retry-After": true,
}

func filterResponseHeaders(h http.Header) {
	for k := range h {
		if !clientResponseHeaders[k] {
			delete(h, k)
		}
	}
}
