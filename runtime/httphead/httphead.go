// Package httphead reads the field lines of an HTTP/1.1 head in place, as net/http's
// readers (http.ReadRequest, http.ReadResponse) read them, for the usual heads only: the
// client server's requests and the engine transport's answers. A head it does not take
// (Scan's ok is false) is its caller's to hand to net/http whole.
//
// net/http's readers build every value as a string of its own, look each name up in
// textproto's interning table and run the transfer checks over the finished map: for a
// short chat those were about 4% of the router's CPU on each side (docs/benchmarks.md,
// "The answer's head" and "The client's head").
package httphead

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"strings"
	"unsafe"

	"golang.org/x/net/http/httpguts"
)

// Buffered returns the head whole in br's buffer: its first line, its field lines (each
// with its CRLF, without the blank line that ends them) and how many bytes it takes with
// that blank line. ok is false when the buffer holds no whole head; nothing is consumed.
func Buffered(br *bufio.Reader) (first, fields []byte, size int, ok bool) {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, nil, 0, false
	}
	head := buf[:end+2]
	nl := bytes.Index(head, []byte("\r\n"))
	return head[:nl], head[nl+2:], end + 4, true
}

// Fields is what Scan read of a head's field lines.
type Fields struct {
	// Length is the Content-Length, -1 when there is none.
	Length int64
	// Close: a Connection field holds the token close.
	Close bool
	// Lines is how many field lines there are.
	Lines int
}

// Scan checks a head's field lines (each ending in CRLF, the blank line excluded) and
// reads their framing. ok is false for a line or a field net/http reads otherwise: no
// colon, an empty or invalid name (a space before the colon included), an invalid value,
// more than one Content-Length or one of other than digits, and any Transfer-Encoding,
// Trailer or Pragma, which net/http reads into other fields. It allocates nothing, so a
// head it refuses (a stream's answer: chunked) costs little before net/http reads it.
func Scan(fields []byte) (f Fields, ok bool) {
	f.Length = -1
	for len(fields) > 0 {
		name, value, rest, colon := field(fields)
		fields = rest
		f.Lines++
		if !colon || len(name) == 0 || !validName(name) || !httpguts.ValidHeaderFieldValue(unsafeString(value)) {
			return Fields{}, false
		}
		switch {
		case bytes.EqualFold(name, []byte("Transfer-Encoding")), bytes.EqualFold(name, []byte("Trailer")),
			bytes.EqualFold(name, []byte("Pragma")):
			return Fields{}, false
		case bytes.EqualFold(name, []byte("Content-Length")):
			if f.Length >= 0 || len(value) == 0 || len(value) > 18 {
				return Fields{}, false
			}
			f.Length = 0
			for _, c := range value {
				if !Digit(c) {
					return Fields{}, false
				}
				f.Length = f.Length*10 + int64(c-'0')
			}
		case bytes.EqualFold(name, []byte("Connection")):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				f.Close = f.Close || bytes.EqualFold(trimOWS(tok), []byte("close"))
			}
		}
	}
	return f, true
}

// Header builds the header of field lines that Scan took, lines long, without the
// Connection field when dropConnection is set (http.ReadResponse drops it for a close).
// The values share one slice, each name's first a slice of its own length, as net/http
// lays them out, and their text is one string, the field lines' copy, which they are
// substrings of: two allocations for all the values, where net/http makes one a value.
func Header(fields []byte, lines int, dropConnection bool) http.Header {
	h := make(http.Header, lines)
	vals := make([]string, lines)
	text, end := string(fields), cap(fields) // a value starts end-cap(value) into text
	for len(fields) > 0 {
		name, value, rest, _ := field(fields)
		key, ok := commonKeys[unsafeString(name)]
		if !ok {
			key = textproto.CanonicalMIMEHeaderKey(string(name))
		}
		v := ""
		if len(value) > 0 {
			at := end - cap(value)
			v = text[at : at+len(value)]
		}
		fields = rest
		if dropConnection && key == "Connection" {
			continue
		}
		if vv := h[key]; vv != nil {
			h[key] = append(vv, v)
			continue
		}
		vals[0] = v
		h[key], vals = vals[:1:1], vals[1:]
	}
	return h
}

// commonKeys are the canonical names of the fields clients send and engines answer with,
// by themselves and in lower case (uvicorn's, and HTTP/2-minded clients'), which a field
// name in either form shares rather than allocating.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Encoding", "Content-Length", "Content-Type", "Date", "Host", "Keep-Alive", "Server",
		"Traceparent", "Tracestate", "User-Agent", "Vary", "X-Request-Id"} {
		m[k], m[strings.ToLower(k)] = k, k
	}
	return m
}()

// field splits the first of fields' lines into its name and its value, trimmed; colon
// is false for a line without one.
func field(fields []byte) (name, value, rest []byte, colon bool) {
	nl := bytes.Index(fields, []byte("\r\n"))
	name, value, colon = bytes.Cut(fields[:nl], []byte(":"))
	return name, trimOWS(value), fields[nl+2:], colon
}

// trimOWS is value without its leading and trailing spaces and tabs: bytes.Trim's, for
// a cutset it would build a table for on every call.
func trimOWS(value []byte) []byte {
	for len(value) > 0 && (value[0] == ' ' || value[0] == '\t') {
		value = value[1:]
	}
	for len(value) > 0 && (value[len(value)-1] == ' ' || value[len(value)-1] == '\t') {
		value = value[:len(value)-1]
	}
	return value
}

// Digit reports whether c is an ASCII digit.
func Digit(c byte) bool { return '0' <= c && c <= '9' }

// validName reports whether b is a field name of token characters.
func validName(b []byte) bool {
	for _, c := range b {
		if !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return true
}

// unsafeString views b as a string for a check or a lookup that keeps nothing of it.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
