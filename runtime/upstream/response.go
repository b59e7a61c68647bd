package upstream

import (
	"bufio"
	"bytes"
	"io"
	"net/http"

	"github.com/routerkit/router/runtime/httphead"
	"github.com/routerkit/router/runtime/sized"
)

// readResponse reads an engine's answer head from br: the usual one, which plainAnswer
// reads, as http.ReadResponse would read it (FuzzAnswerMatchesReadResponse), and any
// other by http.ReadResponse. http.ReadResponse's line reader, header interning and
// transfer checks were 4% of the router's CPU a short request (docs/benchmarks.md, "The
// answer's head").
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodHead {
		return http.ReadResponse(br, req)
	}
	// The first read, as http.ReadResponse's first line would meet it: a failure before
	// any byte is its error too, and a second read could fail otherwise (a reset is an
	// EOF the second time).
	if _, err := br.Peek(1); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if resp := plainAnswer(br, req); resp != nil {
		return resp, nil
	}
	return http.ReadResponse(br, req)
}

// plainAnswer reads the head buffered in br when it is a plain answer: HTTP/1.1, a
// status from 200 but 204 and 304 (to a request other than HEAD), field lines each
// "Name: value" with a valid name and value, one Content-Length of digits, and none of
// Transfer-Encoding, Trailer or Pragma (which http.ReadResponse reads into other fields).
// It returns nil, having consumed nothing, for anything else, or a head not whole in the
// buffer.
func plainAnswer(br *bufio.Reader, req *http.Request) *http.Response {
	line, fields, size, ok := httphead.Buffered(br)
	if !ok || len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || !httphead.Digit(line[9]) || !httphead.Digit(line[10]) || !httphead.Digit(line[11]) ||
		len(line) > 12 && line[12] != ' ' || bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
		return nil // a lone CR or LF would end the line for http.ReadResponse
	}
	code := int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}
	f, ok := httphead.Scan(fields)
	if !ok || f.Length < 0 {
		return nil
	}
	h := httphead.Header(fields, f.Lines, f.Close) // as http.ReadResponse drops Connection for a close
	_, _ = br.Discard(size)
	status := "200 OK" // the usual one, without an allocation
	if string(line[9:]) != status {
		status = string(line[9:])
	}
	resp := &http.Response{Status: status, StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: f.Length, Close: f.Close, Request: req, Body: http.NoBody}
	if f.Length > 0 {
		resp.Body = sized.New(br, f.Length)
	}
	return resp
}
