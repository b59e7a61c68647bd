package h1

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/httphead/headtest"
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
	headtest.Rest
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
	s.Rest = headtest.ReadRest(req.Body, br)
	return s
}

// readBackground is the server's reading of a request, of the background context.
func readBackground(br *bufio.Reader) (*http.Request, error) {
	return readHTTPRequest(context.Background(), br)
}

// readsPlain reports whether plainRequest reads raw's head itself.
func readsPlain(raw []byte) bool {
	br := bufio.NewReaderSize(bytes.NewReader(raw), bufSize)
	br.Peek(1)
	return plainRequest(context.Background(), br) != nil
}

// The client server reads requests as http.ReadRequest reads them, field for field, body
// and what follows it included; the usual ones itself, the others by http.ReadRequest.
func TestRequestMatchesReadRequest(t *testing.T) {
	headtest.Run(t, []headtest.Case{
		{Name: "the OpenAI client's chat", Raw: openAIChat, Plain: true},
		{Name: "a GET without a body", Raw: "GET /v1/models HTTP/1.1\r\nHost: h\r\n\r\n", Plain: true},
		{Name: "a query", Raw: "GET /metrics?name[]=a&x=%41+b HTTP/1.1\r\nHost: h\r\n\r\n", Plain: true},
		{Name: "no Host", Raw: "GET / HTTP/1.1\r\n\r\n", Plain: true},
		{Name: "Connection: close among tokens", Raw: "POST /x HTTP/1.1\r\nHost: h\r\nconnection: Keep-Alive , CLOSE\r\nContent-Length: 2\r\n\r\nok", Plain: true},
		{Name: "lower-case and unusual names, spaces around values", Raw: "POST /x HTTP/1.1\r\nhost: h\r\nx-weird_name.1:  \t v \t\r\nx-a: 1\r\nX-A: 2\r\ncontent-length: 2\r\n\r\nok", Plain: true},
		{Name: "an empty value", Raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Empty:\r\n\r\n", Plain: true},
		{Name: "a body cut short", Raw: "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nshort", Plain: true},
		{Name: "a length of 0", Raw: "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", Plain: true},
		{Name: "chunked", Raw: "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", Plain: false},
		{Name: "two lengths", Raw: "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "a bad length", Raw: "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: +2\r\n\r\nok", Plain: false},
		{Name: "two Hosts", Raw: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", Plain: false},
		{Name: "HTTP/1.0", Raw: "GET / HTTP/1.0\r\nHost: h\r\n\r\n", Plain: false},
		{Name: "an escaped path", Raw: "GET /a%20b HTTP/1.1\r\nHost: h\r\n\r\n", Plain: false},
		{Name: "a lone question mark", Raw: "GET /a? HTTP/1.1\r\nHost: h\r\n\r\n", Plain: false},
		{Name: "two slashes first", Raw: "GET //a/b HTTP/1.1\r\nHost: h\r\n\r\n", Plain: false},
		{Name: "the absolute form", Raw: "GET http://h/a HTTP/1.1\r\nHost: h\r\n\r\n", Plain: false},
		{Name: "an unusual method", Raw: "BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n", Plain: false},
		{Name: "HTTP/2's preface", Raw: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Plain: false},
		{Name: "a folded line", Raw: "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\n\r\n", Plain: false},
		{Name: "a space before the colon", Raw: "GET / HTTP/1.1\r\nHost : h\r\n\r\n", Plain: false},
		{Name: "a line without a colon", Raw: "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", Plain: false},
		{Name: "a control byte in a value", Raw: "GET / HTTP/1.1\r\nHost: h\r\nX-A: \x01\r\n\r\n", Plain: false},
		{Name: "Pragma", Raw: "GET / HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n", Plain: false},
		{Name: "Trailer", Raw: "POST /x HTTP/1.1\r\nHost: h\r\nTrailer: X-T\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "bare line feeds", Raw: "GET / HTTP/1.1\nHost: h\n\n", Plain: false},
		{Name: "a head past the buffer", Raw: "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: " + strings.Repeat("p", 5000) + "\r\n\r\n", Plain: false},
		{Name: "a head cut short", Raw: "POST /x HTTP/1.1\r\nHost: h\r\n", Plain: false},
		{Name: "nothing", Raw: "", Plain: false},
		{Name: "garbage", Raw: "NOT HTTP\r\n\r\n", Plain: false},
	}, readsPlain, seeing(readBackground), seeing(http.ReadRequest))
}

// seeing is what read sees of a request.
func seeing(read func(*bufio.Reader) (*http.Request, error)) func([]byte) requestSeen {
	return func(raw []byte) requestSeen { return seeRequest(raw, read) }
}

// FuzzRequestMatchesReadRequest checks the server's reading of a request against
// http.ReadRequest's on fuzzed heads and bodies.
func FuzzRequestMatchesReadRequest(f *testing.F) {
	f.Add([]byte(openAIChat))
	f.Add([]byte("GET /a/b?c=d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"))
	f.Add([]byte("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nX-A: \x01\r\n\r\nabc"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		headtest.Same(t, raw, seeing(readBackground), seeing(http.ReadRequest))
	})
}
