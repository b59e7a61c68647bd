package upstream

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
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
	Body, BodyErr, Left         string
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
	body, err := io.ReadAll(resp.Body)
	s.Body = string(body)
	if err != nil {
		s.BodyErr = err.Error()
	}
	left, _ := io.ReadAll(br)
	s.Left = string(left)
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
	for _, tc := range []struct {
		name, raw string
		plain     bool
	}{
		{"uvicorn's", uvicorn, true},
		{"no reason, repeated fields", "HTTP/1.1 200\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 2\r\n\r\nok", true},
		{"Connection: close", "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbusy", true},
		{"Connection: keep-alive", "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", true},
		{"a body cut short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true},
		{"spaces around a value", "HTTP/1.1 200 OK\r\nX-S:  \t v \t\r\nContent-Length: 1\r\n\r\nx", true},
		{"an unusual field name", "HTTP/1.1 200 OK\r\nx-weird_name.1: v\r\nContent-Length: 1\r\n\r\nx", true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false},
		{"no length", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end", false},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false},
		{"a bad length", "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok", false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false},
		{"204", "HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n", false},
		{"a folded line", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 2\r\n\r\nok", false},
		{"a space before the colon", "HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 2\r\n\r\nok", false},
		{"Pragma", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nok", false},
		{"a line without a colon", "HTTP/1.1 200 OK\r\nNoColon\r\nContent-Length: 2\r\n\r\nok", false},
		{"close among tokens", "HTTP/1.1 200 OK\r\nconnection: Keep-Alive , CLOSE\r\nContent-Length: 2\r\n\r\nok", true},
		{"a head past the buffer", "HTTP/1.1 200 OK\r\nX-Pad: " + strings.Repeat("p", 5000) + "\r\nContent-Length: 2\r\n\r\nok", false},
		{"nothing", "", false},
		{"garbage", "NOT HTTP\r\n\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readsPlain([]byte(tc.raw)); got != tc.plain {
				t.Errorf("read by plainAnswer: %v, want %v", got, tc.plain)
			}
			ours, theirs := seeAnswer([]byte(tc.raw), http.MethodPost, readResponse), seeAnswer([]byte(tc.raw), http.MethodPost, http.ReadResponse)
			if !reflect.DeepEqual(ours, theirs) {
				t.Errorf("the transport read\n%+v\nhttp.ReadResponse\n%+v", ours, theirs)
			}
		})
	}
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
		ours, theirs := seeAnswer(raw, method, readResponse), seeAnswer(raw, method, http.ReadResponse)
		if !reflect.DeepEqual(ours, theirs) {
			t.Fatalf("for %q the transport read\n%+v\nhttp.ReadResponse\n%+v", raw, ours, theirs)
		}
	})
}
