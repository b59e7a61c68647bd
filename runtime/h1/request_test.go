package h1

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// openAIChat is a chat request as the OpenAI Python client sends it.
const openAIChat = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:30000\r\nAccept-Encoding: gzip, deflate\r\n" +
	"Connection: keep-alive\r\nAccept: application/json\r\nContent-Type: application/json\r\nUser-Agent: OpenAI/Python 1.82.0\r\n" +
	"X-Stainless-Lang: python\r\nX-Stainless-Retry-Count: 0\r\nAuthorization: Bearer sk-x\r\nContent-Length: 17\r\n\r\n" +
	`{"model":"m","x":1}` + "GET /health HTTP/1.1\r\n\r\n"

// requestSeen is what a reading of raw gave: the request's fields, its body and what
// was left in the reader, or the error.
type requestSeen struct {
	Err                    string
	Method, Proto          string
	ProtoMajor, ProtoMinor int
	URL                    url.URL
	Header, Trailer        http.Header
	ContentLength          int64
	TransferEncoding       []string
	Close, NoBody          bool
	Host, RequestURI       string
	Body, BodyErr, Left    string
}

func seeRequest(raw []byte, read func(*bufio.Reader) (*http.Request, error)) requestSeen {
	br := bufio.NewReaderSize(bytes.NewReader(raw), bufSize)
	req, err := read(br)
	if err != nil {
		return requestSeen{Err: err.Error()}
	}
	s := requestSeen{Method: req.Method, Proto: req.Proto, ProtoMajor: req.ProtoMajor, ProtoMinor: req.ProtoMinor,
		URL: *req.URL, Header: req.Header, Trailer: req.Trailer, ContentLength: req.ContentLength,
		TransferEncoding: req.TransferEncoding, Close: req.Close, NoBody: req.Body == http.NoBody, Host: req.Host,
		RequestURI: req.RequestURI}
	body, err := io.ReadAll(req.Body)
	s.Body = string(body)
	if err != nil {
		s.BodyErr = err.Error()
	}
	left, _ := io.ReadAll(br)
	s.Left = string(left)
	return s
}

// readBackground is the server's reading of a request, of the background context.
func readBackground(br *bufio.Reader) (*http.Request, error) {
	return readHTTPRequest(br, context.Background())
}

// readsPlain reports whether plainRequest reads raw's head itself.
func readsPlain(raw []byte) bool {
	br := bufio.NewReaderSize(bytes.NewReader(raw), bufSize)
	br.Peek(1)
	return plainRequest(br, context.Background()) != nil
}

// The client server reads requests as http.ReadRequest reads them, field for field, body
// and what follows it included; the usual ones itself, the others by http.ReadRequest.
func TestRequestMatchesReadRequest(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		plain     bool
	}{
		{"the OpenAI client's chat", openAIChat, true},
		{"a GET without a body", "GET /v1/models HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"a query", "GET /metrics?name[]=a&x=%41+b HTTP/1.1\r\nHost: h\r\n\r\n", true},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", true},
		{"Connection: close among tokens", "POST /x HTTP/1.1\r\nHost: h\r\nconnection: Keep-Alive , CLOSE\r\nContent-Length: 2\r\n\r\nok", true},
		{"lower-case and unusual names, spaces around values", "POST /x HTTP/1.1\r\nhost: h\r\nx-weird_name.1:  \t v \t\r\nx-a: 1\r\nX-A: 2\r\ncontent-length: 2\r\n\r\nok", true},
		{"an empty value", "GET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\n\r\n", true},
		{"a body cut short", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nshort", true},
		{"a length of 0", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", true},
		{"chunked", "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false},
		{"two lengths", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false},
		{"a bad length", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: +2\r\n\r\nok", false},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: h\r\n\r\n", false},
		{"an escaped path", "GET /a%20b HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"a lone question mark", "GET /a? HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"two slashes first", "GET //a/b HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"the absolute form", "GET http://h/a HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"an unusual method", "BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"HTTP/2's preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", false},
		{"a folded line", "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\n\r\n", false},
		{"a space before the colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", false},
		{"a line without a colon", "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", false},
		{"a control byte in a value", "GET / HTTP/1.1\r\nHost: h\r\nX-A: \x01\r\n\r\n", false},
		{"Pragma", "GET / HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n", false},
		{"Trailer", "POST /x HTTP/1.1\r\nHost: h\r\nTrailer: X-T\r\nContent-Length: 2\r\n\r\nok", false},
		{"bare line feeds", "GET / HTTP/1.1\nHost: h\n\n", false},
		{"a head past the buffer", "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: " + strings.Repeat("p", 5000) + "\r\n\r\n", false},
		{"a head cut short", "POST /x HTTP/1.1\r\nHost: h\r\n", false},
		{"nothing", "", false},
		{"garbage", "NOT HTTP\r\n\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readsPlain([]byte(tc.raw)); got != tc.plain {
				t.Errorf("read by plainRequest: %v, want %v", got, tc.plain)
			}
			ours, theirs := seeRequest([]byte(tc.raw), readBackground), seeRequest([]byte(tc.raw), http.ReadRequest)
			if !reflect.DeepEqual(ours, theirs) {
				t.Errorf("the server read\n%+v\nhttp.ReadRequest\n%+v", ours, theirs)
			}
		})
	}
}

// FuzzRequestMatchesReadRequest checks the server's reading of a request against
// http.ReadRequest's on fuzzed heads and bodies.
func FuzzRequestMatchesReadRequest(f *testing.F) {
	f.Add([]byte(openAIChat))
	f.Add([]byte("GET /a/b?c=d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"))
	f.Add([]byte("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-A: \x01\r\n\r\nabc"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ours, theirs := seeRequest(raw, readBackground), seeRequest(raw, http.ReadRequest)
		if !reflect.DeepEqual(ours, theirs) {
			t.Fatalf("for %q the server read\n%+v\nhttp.ReadRequest\n%+v", raw, ours, theirs)
		}
	})
}
