package upstream

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"testing"
)

// bufConn is a connection whose writes go to a buffer.
type bufConn struct {
	net.Conn
	buf *bytes.Buffer
}

func (c bufConn) Write(p []byte) (int, error) { return c.buf.Write(p) }

// written is req as writeRequest writes it, and whether it took its own path (plain).
func written(t *testing.T, req *http.Request) (string, bool) {
	t.Helper()
	var buf bytes.Buffer
	bw := bufio.NewWriterSize(&buf, 1<<20)
	_, _, _, own := plain(req)
	if err := writeRequest(reqWriter{bw, &conn{Conn: bufConn{buf: &buf}}}, req); err != nil {
		return "error: " + err.Error(), own
	}
	bw.Flush()
	return buf.String(), own
}

// byNetHTTP is req as Request.Write writes it.
func byNetHTTP(req *http.Request) string {
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		return "error: " + err.Error()
	}
	return buf.String()
}

// engineRequest is a request as a dispatch makes one, a new Body each call.
func engineRequest(method, host, path, query string, header http.Header, body ...string) *http.Request {
	parts := make([][]byte, len(body))
	for i, b := range body {
		parts[i] = []byte(b)
	}
	b := NewBody(parts...)
	return &http.Request{Method: method, URL: &url.URL{Scheme: "http", Host: host, Path: path, RawQuery: query},
		Header: header, Body: b, ContentLength: b.Len(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
}

// The transport writes the requests a dispatch sends itself, as Request.Write does byte
// for byte, and leaves the others to Request.Write.
func TestHeadMatchesRequestWrite(t *testing.T) {
	dispatch := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r-1"}, "Accept-Encoding": {"identity"},
		"Content-Length": {"27"}, "X-Forwarded-For": {"127.0.0.1"}, "X-Forwarded-Host": {"router:8080"}, "X-Forwarded-Proto": {"http"},
		"User-Agent": {""}, "Authorization": {"Bearer k"}, "X-Multi": {"b", "a"}}
	post := func(host, path string, h http.Header, body ...string) func() *http.Request {
		return func() *http.Request { return engineRequest("POST", host, path, "", h, body...) }
	}
	for _, tc := range []struct {
		name string
		make func() *http.Request
		own  bool
	}{
		{"a dispatch's", post("127.0.0.1:30000", "/v1/chat/completions", dispatch, `{"model":"m","messages":[]}`), true},
		{"a PD half's body in two parts, a query", func() *http.Request {
			return engineRequest("POST", "e:1", "/generate", "a=1&b=%20", dispatch, `{"text":"x"`, `,"bootstrap_room":7}`)
		}, true},
		{"a client's User-Agent, several values", post("e:1", "/v1/completions", http.Header{"User-Agent": {"  curl/8\r\n", "second"}, "X-Sp": {" \ta b\t "}}, "x"), true},
		{"no User-Agent: Go's", func() *http.Request { return engineRequest("PUT", "[::1]:8000", "/p th/é", "", http.Header{}, "x") }, true},
		{"a body past the buffer", post("e:1", "/x", dispatch, strings.Repeat("b", 3<<20)), true},
		{"invalid header names dropped", post("e:1", "/x", http.Header{"Bad Name": {"v"}, "X-Ok": {"v"}}, "x"), true},
		{"a Host field", func() *http.Request { r := post("e:1", "/x", http.Header{}, "x")(); r.Host = "other:2"; return r }, true},
		{"no body", post("e:1", "/x", http.Header{}), false},
		{"a host not in ASCII", post("bücher.example:80", "/x", http.Header{}, "x"), false},
		{"a zone", post("[fe80::1%25eth0]:80", "/x", http.Header{}, "x"), false},
		{"a control byte in the query", func() *http.Request { return engineRequest("POST", "e:1", "/x", "a=\x01", http.Header{}, "x") }, false},
		{"Connection: close", func() *http.Request { r := post("e:1", "/x", http.Header{}, "x")(); r.Close = true; return r }, false},
		{"a trace", func() *http.Request {
			r := post("e:1", "/x", http.Header{}, "x")()
			return r.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{}))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := byNetHTTP(tc.make())
			got, own := written(t, tc.make())
			if own != tc.own {
				t.Errorf("written by the transport: %v, want %v", own, tc.own)
			}
			if got != want {
				t.Errorf("the transport wrote\n%.600q\nRequest.Write\n%.600q", got, want)
			}
		})
	}
}

// FuzzHeadMatchesRequestWrite checks the transport's request against Request.Write's on
// fuzzed methods, targets, hosts, headers and bodies.
func FuzzHeadMatchesRequestWrite(f *testing.F) {
	f.Add("POST", "e:1", "/v1/chat/completions", "q=1", "X-Request-Id", "r-1", "curl", true, "{}")
	f.Add("GET", "[::1]:80", "/a b", "", "user-agent", " x\r\ny ", "", false, "body")
	f.Add("DELETE", "h", "", "%zz", "Bad Key", "v", "", true, "b")
	f.Fuzz(func(t *testing.T, method, host, path, query, key, value, ua string, hasUA bool, body string) {
		h := http.Header{key: {value, value + "2"}, "Content-Type": {"application/json"}}
		if hasUA {
			h["User-Agent"] = []string{ua}
		}
		req := engineRequest(method, host, path, query, h, body)
		want := byNetHTTP(engineRequest(method, host, path, query, h, body))
		if got, _ := written(t, req); got != want {
			t.Fatalf("the transport wrote\n%q\nRequest.Write\n%q", got, want)
		}
	})
}
