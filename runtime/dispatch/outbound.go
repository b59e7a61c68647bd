package dispatch

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/upstream"
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
	return hp.copyFor(in, reqID, make([]string, 3))
}

// copyFor returns the headers an engine gets for a client request with headers in and
// id reqID, with the three values it sets in vals (length 3): the client's headers but
// those the policy drops (neverForwarded, the ones Connection names, the config's), and
// the router's own. The client's values are shared, not copied, each slice clipped to
// its length so that an Add to the copy (a trace hook's) cannot write into the client's:
// a dispatch copied them all and then deleted most (Request.Clone), 1.5% of its CPU.
func (hp HeaderPolicy) copyFor(in http.Header, reqID string, vals []string) http.Header {
	var named map[string]bool
	for _, v := range in["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if named == nil {
				named = map[string]bool{}
			}
			named[http.CanonicalHeaderKey(strings.TrimSpace(f))] = true
		}
	}
	out := make(http.Header, len(in)+3)
	for k, vv := range in {
		if !hp.deny[k] && !named[k] && (hp.allow == nil || hp.allow[k]) {
			out[k] = vv[:len(vv):len(vv)]
		}
	}
	// Asking for identity spares the router inflating what it must read anyway (an
	// engine next to it gains nothing from compressing) and the transport the header it
	// would otherwise add for gzip.
	vals[0], vals[1], vals[2] = "application/json", reqID, "identity"
	out["Content-Type"], out["X-Request-Id"], out["Accept-Encoding"] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
	return out
}

// setForwarded adds the X-Forwarded-For, -Host and -Proto headers for in, as
// httputil.ProxyRequest.SetXForwarded does for a request without forwarding headers of
// its own (the client's are never forwarded), so both PD halves and plain engines see
// the same request. The three values go in vals (length 3).
func setForwarded(h http.Header, in *http.Request, vals []string) {
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

// joinURLPath, singleJoiningSlash and cleanQuery are net/http/httputil's (Copyright The
// Go Authors, BSD-style license), as proxy keeps ReverseProxy's behaviour.

// joinURLPath joins the engine's URL path a and the client's path b with one slash.
func joinURLPath(a, b *url.URL) (path, rawpath string) {
	if a.RawPath == "" && b.RawPath == "" {
		return singleJoiningSlash(a.Path, b.Path), ""
	}
	apath, bpath := a.EscapedPath(), b.EscapedPath()
	aslash, bslash := strings.HasSuffix(apath, "/"), strings.HasPrefix(bpath, "/")
	switch {
	case aslash && bslash:
		return a.Path + b.Path[1:], apath + bpath[1:]
	case !aslash && !bslash:
		return a.Path + "/" + b.Path, apath + "/" + bpath
	}
	return a.Path + b.Path, apath + bpath
}

func singleJoiningSlash(a, b string) string {
	aslash, bslash := strings.HasSuffix(a, "/"), strings.HasPrefix(b, "/")
	switch {
	case aslash && bslash:
		return a + b[1:]
	case !aslash && !bslash:
		return a + "/" + b
	}
	return a + b
}

// engineQuery is the query an engine at target gets for the client's request URL in: the
// engine URL's own query, then the client's, cleaned. Every engine a request reaches gets
// it, a plain engine and both PD halves alike, as SGLang's PD router builds both halves'
// requests from one URL.
func engineQuery(target, in *url.URL) string {
	q := cleanQuery(in.RawQuery)
	if target.RawQuery != "" {
		q = strings.TrimSuffix(target.RawQuery+"&"+q, "&")
	}
	return q
}

// maxQueryParams is net/url's default bound on a query's parameters.
const maxQueryParams = 10000

// cleanQuery drops the query parameters that do not parse (a ';', a bad escape), and
// re-encodes a query of too many: an engine must not read a query the router did not.
func cleanQuery(s string) string {
	reencode := func(s string) string {
		v, _ := url.ParseQuery(s)
		return v.Encode()
	}
	if strings.Count(s, "&")+1 > maxQueryParams {
		return reencode(s)
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// payload is a request body sent to engines without copying the client's bytes: the
// body itself, or for PD the body's head and a tail with the bootstrap fields.
type payload struct {
	head, tail []byte
}

func (p payload) len() int64 { return int64(len(p.head) + len(p.tail)) }

func (p payload) getBody() (io.ReadCloser, error) { return p.reader(), nil }

// reader is the payload as a request body the router's transport writes from these
// bytes, without copying them (upstream.Body).
func (p payload) reader() io.ReadCloser { return upstream.NewBody(p.head, p.tail) }

// request is the request to the engine, under ctx: the client's method, path (under the
// engine's URL) and query, the payload as an in-memory body and the engine's headers. An
// in-memory body goes out with its headers in one write; a body the transport cannot
// see is in memory is written in a second call, a second TCP segment for the engine to
// wake up to.
func (a *attempt) request(ctx context.Context, in *http.Request) *http.Request {
	out := in.WithContext(ctx) // a shallow copy: its URL and header are made below
	out.Close = false
	target := a.w.Target()
	u := *in.URL
	u.Scheme, u.Host, out.Host = target.Scheme, target.Host, ""
	u.Path, u.RawPath = joinURLPath(target, in.URL)
	u.RawQuery = engineQuery(target, in.URL)
	out.URL = &u
	// The policy leaves out the hop-by-hop headers, those Connection names and the
	// forwarding headers with the rest it never forwards. The seven values the router
	// sets share one allocation.
	vals := make([]string, 7)
	out.Header = a.dp.headers.copyFor(in.Header, a.out.ID(), vals[0:3])
	vals[6] = strconv.FormatInt(a.body.len(), 10)
	out.Header["Content-Length"] = vals[6:7:7]
	setForwarded(out.Header, in, vals[3:6])
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // no Go default in its place
	}
	out.Body, out.ContentLength, out.GetBody = a.body.reader(), a.body.len(), a.body.getBody
	if a.dp.Outbound != nil {
		out = a.dp.Outbound(out, a.w)
	}
	return out
}
