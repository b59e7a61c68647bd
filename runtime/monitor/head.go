package monitor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"strconv"

	"github.com/routerkit/router/runtime/sized"
)

// maxHeadBytes bounds a response head (status line and header fields) the monitor reads.
// An engine's answer to /health or a load poll has a handful of short fields; a peer that
// sends more is not an engine worth polling.
const maxHeadBytes = 16 << 10

// errHeadTooLong is a response head over maxHeadBytes.
var errHeadTooLong = fmt.Errorf("response head longer than %d bytes", maxHeadBytes)

// head is what a poll needs of an HTTP/1.1 response head.
type head struct {
	status  int
	reason  string // the status line's text after the code; kept for non-2xx answers only
	length  int64  // Content-Length, -1 when absent
	chunked bool
	gzip    bool // Content-Encoding: gzip
	close   bool // the engine closes the connection after this answer
}

// readHead reads a response head from br without building an http.Response: at a poll
// every half second per engine, http.ReadResponse's header map, canonicalised keys and
// strings were a fifth of what a poll cost (docs/benchmarks.md, "Fleet polling"). It
// reads only the fields that decide how the body is framed and coded, and refuses what
// net/http might read otherwise (FuzzReadHead holds it to http.ReadResponse): a status
// line that is not HTTP/1.x with a three-digit code, a field line without a colon, with
// space before it, with control bytes in its value or longer than br's buffer,
// obsolete line folding, differing Content-Length values, a Transfer-Encoding other
// than one chunked on HTTP/1.1, and a Content-Length beside chunked.
func readHead(br *bufio.Reader) (head, error) {
	h := head{length: -1}
	budget := maxHeadBytes
	line, err := headLine(br, &budget, false)
	if err != nil {
		return h, err
	}
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	if len(proto) != 8 || !bytes.HasPrefix(proto, []byte("HTTP/1.")) || proto[7] < '0' || proto[7] > '9' {
		return h, fmt.Errorf("malformed HTTP version %q", proto)
	}
	http10 := proto[7] == '0'
	code, reason, _ := bytes.Cut(rest, []byte(" "))
	if len(code) != 3 || code[0] < '1' || code[0] > '9' || code[1] < '0' || code[1] > '9' || code[2] < '0' || code[2] > '9' {
		return h, fmt.Errorf("malformed HTTP status code %q", code)
	}
	h.status = int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	if h.status/100 != 2 {
		h.reason = string(reason)
	}
	closes, keepAlive, encoded := false, false, false
	for {
		line, err := headLine(br, &budget, false)
		if err != nil {
			return h, err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		value = bytes.Trim(value, " \t")
		if !ok || !validFieldName(name) || !validFieldValue(value) {
			return h, fmt.Errorf("malformed MIME header line: %q", line)
		}
		switch {
		case asciiEqualFold(name, "content-length"):
			n, err := parseLength(value)
			if err != nil || (h.length >= 0 && h.length != n) {
				return h, fmt.Errorf("bad Content-Length %q", value)
			}
			h.length = n
		case asciiEqualFold(name, "transfer-encoding"):
			if http10 || h.chunked || !asciiEqualFold(value, "chunked") {
				return h, fmt.Errorf("unsupported transfer encoding %q", value)
			}
			h.chunked = true
		case asciiEqualFold(name, "content-encoding"):
			if !encoded { // the first, as Header.Get reads it
				h.gzip, encoded = string(value) == "gzip", true
			}
		case asciiEqualFold(name, "connection"):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				closes = closes || asciiEqualFold(tok, "close")
				keepAlive = keepAlive || asciiEqualFold(tok, "keep-alive")
			}
		}
	}
	if h.chunked && h.length >= 0 {
		return h, errors.New("both Content-Length and Transfer-Encoding: chunked")
	}
	// HTTP/1.0 closes unless the engine asks to keep the connection.
	h.close = closes || (http10 && !keepAlive)
	if h.status/100 == 1 || h.status == 204 || h.status == 304 {
		h.length, h.chunked = 0, false
	}
	if h.length < 0 && !h.chunked {
		h.close = true // the body ends where the connection does
	}
	return h, nil
}

// body returns the reader of the body that follows h on br. A body shorter than its
// Content-Length ends in io.ErrUnexpectedEOF, as net/http's does.
func (h head) body(br *bufio.Reader) io.Reader {
	switch {
	case h.chunked:
		return httputil.NewChunkedReader(br)
	case h.length >= 0:
		return sized.New(br, h.length)
	}
	return br
}

// trailer reads what follows a chunked body's last chunk, up to the blank line that
// ends the response, so the next response on the connection starts where it should.
// Its lines end in CRLF.
func (h head) trailer(br *bufio.Reader) error {
	if !h.chunked {
		return nil
	}
	budget := maxHeadBytes
	for {
		line, err := headLine(br, &budget, true)
		if err != nil {
			return fmt.Errorf("reading the trailer: %w", err)
		}
		if len(line) == 0 {
			return nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || !validFieldName(name) || !validFieldValue(bytes.Trim(value, " \t")) {
			return fmt.Errorf("malformed trailer line: %q", line)
		}
	}
}

// headLine returns the next line of a head without its line ending, charging it to
// budget. With crlf, a line must end in CRLF, as net/http requires of a trailer. The slice is valid until the next read of br.
func headLine(br *bufio.Reader, budget *int, crlf bool) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	*budget -= len(line)
	if *budget < 0 || errors.Is(err, bufio.ErrBufferFull) {
		return nil, errHeadTooLong
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	} else if crlf {
		return nil, fmt.Errorf("line %q does not end in CRLF", line)
	}
	if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
		return nil, fmt.Errorf("malformed MIME header: obsolete line folding %q", line)
	}
	return line, nil
}

// parseLength reads a Content-Length value: decimal digits only.
func parseLength(v []byte) (int64, error) {
	if len(v) == 0 || len(v) > 18 {
		return 0, errors.New("bad length")
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, errors.New("bad length")
		}
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// validFieldValue reports whether a field value holds no control bytes but tabs.
func validFieldValue(v []byte) bool {
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// validFieldName reports whether name is an HTTP token, as a field name must be.
func validFieldName(name []byte) bool {
	if len(name) == 0 {
		return false
	}
	for _, c := range name {
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) >= 0 {
			return false
		}
	}
	return true
}

// asciiEqualFold reports whether b equals the lower-case ASCII s, ignoring case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
