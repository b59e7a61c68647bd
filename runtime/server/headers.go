package server

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"
)

// dateHeader is the Date of the router's responses: net/http would format it anew for
// every response (the engine's own is not passed on), which was about half a percent
// of the router's CPU per request; it changes once a second.
type dateHeader struct{ cur atomic.Pointer[dateValue] }

type dateValue struct {
	sec int64
	v   []string // cap 1: a header Add appends to a copy, never to the shared value
}

var responseDate dateHeader

// at returns the header value for t, formatting it when the second changed.
func (d *dateHeader) at(t time.Time) []string {
	sec := t.Unix()
	if cur := d.cur.Load(); cur != nil && cur.sec == sec {
		return cur.v
	}
	v := &dateValue{sec: sec, v: []string{t.UTC().Format(http.TimeFormat)}}
	d.cur.Store(v)
	return v.v[:1:1]
}

// requestID returns the client's X-Request-Id when it is a short token, else a new
// random id: it names the request in the router's logs and in every error answer.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); len(id) > 0 && len(id) <= 64 && isToken(id) {
		return id
	}
	// 96 random bits as 24 hex digits. An id must be unique, not secret: the runtime's
	// generator (per thread, seeded from the system's) is enough and costs a few
	// nanoseconds, where crypto/rand's is a system call's worth.
	var raw [12]byte
	binary.BigEndian.PutUint64(raw[:8], rand.Uint64())
	binary.BigEndian.PutUint32(raw[8:], rand.Uint32())
	var id [24]byte
	hex.Encode(id[:], raw[:])
	return string(id[:])
}

func isToken(s string) bool {
	for _, c := range []byte(s) {
		ok := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}
