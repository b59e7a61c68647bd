package h1

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/url"

	"github.com/routerkit/router/runtime/httphead"
	"github.com/routerkit/router/runtime/sized"
)

// readHTTPRequest reads a request of context ctx from br: the usual one, which
// plainRequest reads, as http.ReadRequest would read it (FuzzRequestMatchesReadRequest), and any other by
// http.ReadRequest. Its line reader, header interning, URL parser and transfer checks
// were 3.6% of the router's CPU a short chat (docs/benchmarks.md, "The client's head").
func readHTTPRequest(ctx context.Context, br *bufio.Reader) (*http.Request, error) {
	// The first read, as http.ReadRequest's first line would meet it: a failure before
	// any byte is its error too, and a second read could fail otherwise (a reset is an
	// EOF the second time).
	if _, err := br.Peek(1); err != nil {
		return nil, err
	}
	if req := plainRequest(ctx, br); req != nil {
		return req, nil
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	return req.WithContext(ctx), nil
}

// plainMethods are the methods plainRequest reads, each its own string.
var plainMethods = map[string]string{}

func init() {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete,
		http.MethodOptions, http.MethodPatch} {
		plainMethods[m] = m
	}
}

// plainRequest reads the head buffered in br when it is a plain request: one of the
// usual methods, HTTP/1.1, a target in origin form of unreserved characters and slashes
// with an optional query of visible ASCII, and field lines httphead.Scan takes, with at
// most one Host. It returns nil, having consumed nothing, for anything else, or a head
// not whole in the buffer.
func plainRequest(ctx context.Context, br *bufio.Reader) *http.Request {
	line, fields, size, ok := httphead.Buffered(br)
	if !ok {
		return nil
	}
	method, rest, _ := bytes.Cut(line, []byte(" "))
	target, proto, _ := bytes.Cut(rest, []byte(" "))
	m, known := plainMethods[string(method)]
	if !known || string(proto) != "HTTP/1.1" {
		return nil
	}
	path, query, hasQuery := bytes.Cut(target, []byte("?"))
	if !plainPath(path) || hasQuery && !plainQuery(query) {
		return nil
	}
	f, ok := httphead.Scan(fields)
	if !ok {
		return nil
	}
	h := httphead.Header(fields, f.Lines, false)
	host := h["Host"]
	if len(host) > 1 {
		return nil // http.ReadRequest's error
	}
	delete(h, "Host") // promoted to the request's Host, as http.ReadRequest does
	_, _ = br.Discard(size)
	uri := string(target)
	u := &url.URL{Path: uri[:len(path)]}
	if hasQuery {
		u.RawQuery = uri[len(path)+1:]
	}
	r := http.Request{Method: m, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: http.NoBody, ContentLength: max(f.Length, 0), Close: f.Close, RequestURI: uri}
	if len(host) == 1 {
		r.Host = host[0]
	}
	req := r.WithContext(ctx) // the one request made: r stays on the stack
	if f.Length > 0 {
		req.Body = sized.New(br, f.Length)
	}
	return req
}

// plainPath reports whether p is a path that url.ParseRequestURI keeps as it is: a
// slash, then unreserved characters and slashes, not two slashes first.
func plainPath(p []byte) bool {
	if len(p) == 0 || p[0] != '/' || len(p) > 1 && p[1] == '/' {
		return false
	}
	for _, c := range p {
		if !unreserved(c) && c != '/' {
			return false
		}
	}
	return true
}

// plainQuery reports whether q is a query url.ParseRequestURI keeps whole as RawQuery:
// not empty (a lone "?" sets ForceQuery) and of visible ASCII.
func plainQuery(q []byte) bool {
	for _, c := range q {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return len(q) > 0
}

// unreserved reports whether c is an unreserved character of RFC 3986.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || httphead.Digit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}
