package upstream

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"

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

// commonKeys are the canonical names of the fields engines answer with, by themselves and
// in lower case (uvicorn's), which a field name in either form shares rather than
// allocating.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Content-Length", "Content-Type", "Date", "Server", "Connection", "Keep-Alive",
		"X-Request-Id", "Cache-Control", "Vary", "Content-Encoding"} {
		m[k], m[strings.ToLower(k)] = k, k
	}
	return m
}()

// plainAnswer reads the head buffered in br when it is a plain answer: HTTP/1.1, a
// status from 200 but 204 and 304 (to a request other than HEAD), field lines each
// "Name: value" with a valid name and value, one Content-Length of digits, and none of
// Transfer-Encoding, Trailer or Pragma (which http.ReadResponse reads into other fields).
// It returns nil, having consumed nothing, for anything else, or a head not whole in the
// buffer.
func plainAnswer(br *bufio.Reader, req *http.Request) *http.Response {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return nil
	}
	head := buf[:end+2] // each line with its CRLF
	nl := bytes.Index(head, []byte("\r\n"))
	line := head[:nl]
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || !digit(line[9]) || !digit(line[10]) || !digit(line[11]) ||
		len(line) > 12 && line[12] != ' ' || bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
		return nil // a lone CR or LF would end the line for http.ReadResponse
	}
	code := int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}
	fields := head[nl+2:]
	h := make(http.Header, bytes.Count(fields, []byte("\r\n")))
	length := int64(-1)
	closes := false
	for len(fields) > 0 {
		nl := bytes.Index(fields, []byte("\r\n"))
		line := fields[:nl]
		fields = fields[nl+2:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return nil
		}
		name := line[:colon]
		value := bytes.Trim(line[colon+1:], " \t")
		if !validName(name) || !httpguts.ValidHeaderFieldValue(string(value)) {
			return nil
		}
		key, ok := commonKeys[string(name)]
		if !ok {
			key = textproto.CanonicalMIMEHeaderKey(string(name))
		}
		switch key {
		case "Transfer-Encoding", "Trailer", "Pragma":
			return nil
		case "Content-Length":
			if length >= 0 || len(value) == 0 || len(value) > 18 {
				return nil
			}
			length = 0
			for _, c := range value {
				if !digit(c) {
					return nil
				}
				length = length*10 + int64(c-'0')
			}
		case "Connection":
			closes = closes || httpguts.HeaderValuesContainsToken([]string{string(value)}, "close")
		}
		h[key] = append(h[key], string(value))
	}
	if length < 0 {
		return nil
	}
	if closes {
		delete(h, "Connection") // as http.ReadResponse does for a close
	}
	_, _ = br.Discard(end + 4)
	resp := &http.Response{Status: string(line[9:]), StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: length, Close: closes, Request: req, Body: http.NoBody}
	if length > 0 {
		resp.Body = sized.New(br, length)
	}
	return resp
}

func digit(c byte) bool { return '0' <= c && c <= '9' }

// validName reports whether b is a field name of token characters.
func validName(b []byte) bool {
	for _, c := range b {
		if !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return true
}
