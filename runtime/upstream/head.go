package upstream

import (
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// A request the transport sends is written as net/http's Request.Write writes it, byte
// for byte (FuzzHeadMatchesRequestWrite), by writeRequest when it is the kind a dispatch
// sends: an in-memory Body of its declared length, no Connection: close, no trailers,
// no trace hooks and a plain host. Request.Write's formatted prints, transfer writer and
// header sorter were 7% of the router's CPU a short request (docs/benchmarks.md, "The
// request head written by the transport"). Any other request goes to Request.Write.
// engine_transport: net_http is the switch back to all of net/http's client.

// defaultUserAgent is Request.Write's User-Agent for a request without one.
const defaultUserAgent = "Go-http-client/1.1"

// excludedHeaders are the headers Request.Write writes from the request's fields, or not
// at all, rather than from its Header.
var excludedHeaders = map[string]bool{"Host": true, "User-Agent": true, "Content-Length": true, "Transfer-Encoding": true, "Trailer": true}

// writeRequest writes req to w, by writeHead and the Body's parts when plain reports the
// request is one it writes as Request.Write does, and by Request.Write otherwise.
func writeRequest(w reqWriter, req *http.Request) error {
	b, host, ruri, ok := plain(req)
	if !ok {
		return req.Write(w)
	}
	writeHead(w, req, host, ruri)
	_, err := w.body(b)
	return err
}

// plain reports whether req is written here, with its Body, host and request target.
func plain(req *http.Request) (b *Body, host, ruri string, ok bool) {
	b, ok = req.Body.(*Body)
	if !ok || req.ContentLength <= 0 || b.Len() != req.ContentLength || req.Close ||
		req.TransferEncoding != nil || req.Trailer != nil || req.Method == "" || req.Method == http.MethodConnect {
		return nil, "", "", false
	}
	host = req.Host
	if host == "" {
		host = req.URL.Host
	}
	// Request.Write turns a host that is not ASCII into punycode, drops one that is not
	// a valid Host header and a zone from an IPv6 address: left to it.
	if !ascii(host) || strings.IndexByte(host, '%') >= 0 || !httpguts.ValidHostHeader(host) {
		return nil, "", "", false
	}
	ruri = req.URL.RequestURI()
	if strings.IndexFunc(ruri, isCTL) >= 0 {
		return nil, "", "", false // Request.Write's error
	}
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil {
		return nil, "", "", false
	}
	return b, host, ruri, true
}

// writeHead writes req's request line and headers: Request.Write's, in its order. The
// header's keys are sorted on the stack for a request of up to 32 headers.
func writeHead(w reqWriter, req *http.Request, host, ruri string) {
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(ruri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	ua := defaultUserAgent
	if vv, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(vv) > 0 {
			ua = vv[0]
		}
	}
	if ua != "" {
		writeField(w, "User-Agent", ua)
	}
	w.WriteString("Content-Length: ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
	w.WriteString("\r\n")
	var held [32]string
	keys := held[:0]
	for k := range req.Header {
		if !excludedHeaders[k] && httpguts.ValidHeaderFieldName(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			writeField(w, k, v)
		}
	}
	w.WriteString("\r\n")
}

// writeField writes a header line, its value as Request.Write cleans it: line breaks
// made spaces, then spaces and tabs trimmed at both ends.
func writeField(w reqWriter, k, v string) {
	if strings.ContainsAny(v, "\r\n") {
		b := []byte(v) // byte by byte: invalid UTF-8 stays as it is
		for i, c := range b {
			if c == '\r' || c == '\n' {
				b[i] = ' '
			}
		}
		v = string(b)
	}
	w.WriteString(k)
	w.WriteString(": ")
	w.WriteString(strings.Trim(v, " \t\r\n"))
	w.WriteString("\r\n")
}

func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// isCTL is Request.Write's test of a request target's bytes (a control byte).
func isCTL(r rune) bool { return r < ' ' || r == 0x7f }
