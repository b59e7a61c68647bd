// Package reqid names each request the router serves: the id a client sent in one of the
// configured headers, or one the router makes. The id is echoed to the client, sent to
// engines, written on the request's log line and put in its span, so that a failure a
// client reports can be tied to the engine that served it.
//
// A client chooses what it sends: an id longer than MaxLen or with characters outside
// letters, digits and -_.: is replaced by a new one, never logged or forwarded.
package reqid

import (
	"math/rand/v2"
	"net/http"
	"strings"
)

// DefaultHeaders are SMG's --request-id-headers defaults, read in this order.
var DefaultHeaders = []string{"x-request-id", "x-correlation-id", "x-trace-id", "request-id"}

// MaxLen bounds a client's id; a UUID is 36 characters, an OpenAI id about 40.
const MaxLen = 128

// Reader finds a request's id in the headers it was configured with.
type Reader struct {
	headers []string // canonical names
}

// NewReader reads ids from headers, in order; none (nil or empty) means DefaultHeaders.
func NewReader(headers []string) *Reader {
	if len(headers) == 0 {
		headers = DefaultHeaders
	}
	r := &Reader{headers: make([]string, len(headers))}
	for i, h := range headers {
		r.headers[i] = http.CanonicalHeaderKey(h)
	}
	return r
}

// From returns r's id: the value of the first configured header the client sent, when
// it is Valid, else a new id. replaced reports that the client's id was refused, so
// the caller can count it without writing what the client sent anywhere.
func (rd *Reader) From(r *http.Request) (id string, replaced bool) {
	for _, h := range rd.headers {
		if v := r.Header[h]; len(v) > 0 {
			if Valid(v[0]) {
				return v[0], false
			}
			return New(r.URL.Path), true
		}
	}
	return New(r.URL.Path), false
}

// Valid reports whether a client's id may name a request: 1 to MaxLen letters, digits
// and -_.: (no spaces, quotes or control characters that would forge a log line or a
// header).
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// alphabet is SMG's: an OpenAI-like id's random part.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomLen is the random part's length, 24 as SMG's (about 143 bits).
const randomLen = 24

// New returns a new id in SMG's format for a request on path: chatcmpl- for chat,
// cmpl- for completions, gnt- for generate, req- for anything else, then 24 random
// letters and digits. An id must be unique, not secret: the runtime's generator (per
// thread, seeded from the system's) is enough and costs a few nanoseconds, where
// crypto/rand's is a system call's worth.
func New(path string) string {
	prefix := "req-"
	switch {
	case strings.Contains(path, "/chat/completions"):
		prefix = "chatcmpl-"
	case strings.Contains(path, "/completions"):
		prefix = "cmpl-"
	case strings.Contains(path, "/generate"):
		prefix = "gnt-"
	}
	var b [len("chatcmpl-") + randomLen]byte
	n := copy(b[:], prefix)
	// 62^8 < 2^48: each 64-bit draw gives 8 characters with a negligible modulo bias.
	for i := 0; i < randomLen; i += 8 {
		v := rand.Uint64()
		for j := range 8 {
			b[n+i+j] = alphabet[v%uint64(len(alphabet))]
			v /= uint64(len(alphabet))
		}
	}
	return string(b[:n+randomLen])
}
