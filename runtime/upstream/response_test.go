package upstream

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/httphead/headtest"
)

// uvicorn is an answer as SGLang's and vLLM's server (uvicorn) writes it.
const uvicorn = "HTTP/1.1 200 OK\r\ndate: Fri, 04 Dec 2026 16:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: 27\r\ncontent-type: application/json\r\n\r\n{\"id\":\"1\",\"choices\":[]}   "

// answerSeen is what a reading of raw gave: the answer's fields, its body and what was
// left in the reader, or the error.
type answerSeen struct {
	Err                         string
	Status                      string
	StatusCode                  int
	Proto                       string
	ProtoMajor, ProtoMinor      int
	Header, Trailer             http.Header
	ContentLength               int64
	TransferEncoding            []string
	Close, Uncompressed, NoBody bool
	headtest.Rest
}

func seeAnswer(raw []byte, method string, read func(*bufio.Reader, *http.Request) (*http.Response, error)) answerSeen {
	br := bufio.NewReaderSize(bytes.NewReader(raw), bufferSize)
	req, _ := http.NewRequest(method, "http://e:1/x", nil)
	resp, err := read(br, req)
	if err != nil {
		return answerSeen{Err: err.Error()}
	}
	s := answerSeen{Status: resp.Status, StatusCode: resp.StatusCode, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor,
		ProtoMinor: resp.ProtoMinor, Header: resp.Header, Trailer: resp.Trailer, ContentLength: resp.ContentLength,
		TransferEncoding: resp.TransferEncoding, Close: resp.Close, Uncompressed: resp.Uncompressed, NoBody: resp.Body == http.NoBody}
	s.Rest = headtest.ReadRest(resp.Body, br)
	return s
}

// readsPlain reports whether plainAnswer reads raw's head itself.
func readsPlain(raw []byte) bool {
	br := bufio.NewReaderSize(bytes.NewReader(raw), bufferSize)
	br.Peek(1)
	req, _ := http.NewRequest(http.MethodPost, "http://e:1/x", nil)
	return plainAnswer(br, req) != nil
}

// The transport reads the answers engines send as http.ReadResponse reads them, field
// for field, body and what follows it included; the usual ones itself, the others by
// http.ReadResponse.
func TestAnswerMatchesReadResponse(t *testing.T) {
	headtest.Run(t, []headtest.Case{
		{Name: "uvicorn's", Raw: uvicorn, Plain: true},
		{Name: "no reason, repeated fields", Raw: "HTTP/1.1 200\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 2\r\n\r\nok", Plain: true},
		{Name: "Connection: close", Raw: "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy", Plain: true},
		{Name: "Connection: keep-alive", Raw: "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", Plain: true},
		{Name: "a body cut short", Raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", Plain: true},
		{Name: "spaces around a value", Raw: "HTTP/1.1 200 OK\r\nX-S:  \t v \t\r\nContent-Length: 1\r\n\r\nx", Plain: true},
		{Name: "an unusual field name", Raw: "HTTP/1.1 200 OK\r\nx-weird_name.1: v\r\nContent-Length: 1\r\n\r\nx", Plain: true},
		{Name: "chunked", Raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", Plain: false},
		{Name: "no length", Raw: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end", Plain: false},
		{Name: "two lengths", Raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "a bad length", Raw: "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok", Plain: false},
		{Name: "HTTP/1.0", Raw: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "204", Raw: "HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n", Plain: false},
		{Name: "a folded line", Raw: "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "a space before the colon", Raw: "HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "Pragma", Raw: "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "a line without a colon", Raw: "HTTP/1.1 200 OK\r\nNoColon\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "close among tokens", Raw: "HTTP/1.1 200 OK\r\nconnection: Keep-Alive , CLOSE\r\nContent-Length: 2\r\n\r\nok", Plain: true},
		{Name: "a head past the buffer", Raw: "HTTP/1.1 200 OK\r\nX-Pad: " + strings.Repeat("p", 5000) + "\r\nContent-Length: 2\r\n\r\nok", Plain: false},
		{Name: "nothing", Raw: "", Plain: false},
		{Name: "garbage", Raw: "NOT HTTP\r\n\r\n", Plain: false},
	}, readsPlain, toPost(readResponse), toPost(http.ReadResponse))
}

// toPost is a reading of an answer to a POST.
func toPost(read func(*bufio.Reader, *http.Request) (*http.Response, error)) func([]byte) answerSeen {
	return func(raw []byte) answerSeen { return seeAnswer(raw, http.MethodPost, read) }
}

// FuzzAnswerMatchesReadResponse checks the transport's reading of an answer against
// http.ReadResponse's on fuzzed heads and bodies, for POST and HEAD.
func FuzzAnswerMatchesReadResponse(f *testing.F) {
	f.Add([]byte(uvicorn), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nConnection: close, x\r\nContent-Length: 3\r\nX-A: \x01\r\n\r\nabc"), true)
	f.Add([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"), false)
	f.Fuzz(func(t *testing.T, raw []byte, head bool) {
		method := http.MethodPost
		if head {
			method = http.MethodHead
		}
		headtest.Same(t, raw, func(raw []byte) answerSeen { return seeAnswer(raw, method, readResponse) },
			func(raw []byte) answerSeen { return seeAnswer(raw, method, http.ReadResponse) })
	})
}
