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
	length, closes, lines, ok := framing(fields)
	if !ok {
		return nil
	}
	// The values share one slice, each key's first a slice of its own length, as
	// http.ReadResponse lays them out.
	h := make(http.Header, lines)
	vals := make([]string, lines)
	for len(fields) > 0 {
		name, value, rest, _ := field(fields)
		fields = rest
		key, ok := commonKeys[string(name)]
		if !ok {
			key = textproto.CanonicalMIMEHeaderKey(string(name))
		}
		if closes && key == "Connection" {
			continue // as http.ReadResponse drops it for a close
		}
		if vv := h[key]; vv != nil {
			h[key] = append(vv, string(value))
			continue
		}
		vals[0] = string(value)
		h[key], vals = vals[:1:1], vals[1:]
	}
	_, _ = br.Discard(end + 4)
	resp := &http.Response{Status: string(line[9:]), StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: length, Close: closes, Request: req, Body: http.NoBody}
	if length > 0 {
		resp.Body = sized.New(br, length)
	}
	return resp
}

// field splits the first of fields' lines into its name and its value, trimmed; colon
// is false for a line without one.
func field(fields []byte) (name, value, rest []byte, colon bool) {
	nl := bytes.Index(fields, []byte("\r\n"))
	name, value, colon = bytes.Cut(fields[:nl], []byte(":"))
	return name, bytes.Trim(value, " \t"), fields[nl+2:], colon
}

// framing checks a head's field lines and reads their framing: the Content-Length,
// whether the answer closes its connection, and how many lines there are. ok is false
// for a line or a field http.ReadResponse reads otherwise. It allocates nothing, so that
// an answer it refuses (a stream's: chunked) costs little before ReadResponse reads it.
func framing(fields []byte) (length int64, closes bool, lines int, ok bool) {
	length = -1
	for len(fields) > 0 {
		name, value, rest, colon := field(fields)
		fields = rest
		lines++
		if !colon || len(name) == 0 || !validName(name) || !httpguts.ValidHeaderFieldValue(string(value)) {
			return 0, false, 0, false // no colon, an empty or invalid name, an invalid value
		}
		switch {
		case bytes.EqualFold(name, []byte("Transfer-Encoding")), bytes.EqualFold(name, []byte("Trailer")),
			bytes.EqualFold(name, []byte("Pragma")):
			return 0, false, 0, false
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length >= 0 || len(value) == 0 || len(value) > 18 {
				return 0, false, 0, false
			}
			length = 0
			for _, c := range value {
				if !digit(c) {
					return 0, false, 0, false
				}
				length = length*10 + int64(c-'0')
			}
		case bytes.EqualFold(name, []byte("Connection")):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				closes = closes || bytes.EqualFold(bytes.Trim(tok, " \t"), []byte("close"))
			}
		}
	}
	return length, closes, lines, length >= 0
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
