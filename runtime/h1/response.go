package h1

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bufferBeforeChunking is how much of a response is held before its framing is chosen:
// a handler that finishes within it gets a Content-Length, net/http's figure.
const bufferBeforeChunking = 2048

// response is the http.ResponseWriter of one request, with net/http's behaviour: the
// status line and headers go out with the first bytes past bufferBeforeChunking, at a
// Flush or at the handler's end; Content-Length when the handler finished within the
// buffer, chunked (close-delimited for HTTP/1.0) otherwise; Content-Type sniffed when
// unset; no body for HEAD, 1xx, 204 and 304; trailers in the last chunk.
type response struct {
	c      *conn
	req    *http.Request
	body   *body // nil: the request had none
	held   body  // what body points to when there is one: one allocation for both
	header http.Header
	// snap is the header as it was at WriteHeader, when the handler touched the header
	// after WriteHeader and before the head went out (net/http's snapshot).
	snap http.Header

	status        int
	wroteHeader   bool  // the handler's status is set
	committed     bool  // the head is in the write buffer
	chunked       bool  // the body goes in chunks
	bodyless      bool  // the body's bytes are counted, not sent (HEAD, 204, 304)
	contentLength int64 // declared or computed, -1 for none
	written       int64
	buffered      int // bytes held in c.pre
	closeAfter    bool
	trailers      []string // the keys the Trailer header declared

	wants10KeepAlive bool
}

func (w *response) Header() http.Header {
	if w.wroteHeader && !w.committed && w.snap == nil {
		w.snap = w.header.Clone()
	}
	return w.header
}

func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.wroteHeader {
		w.c.s.logf("h1: superfluous response.WriteHeader call (status %d after %d)", code, w.status)
		return
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.wroteHeader = true
	w.status = code
	if cl := w.header.Get("Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.s.logf("h1: invalid Content-Length of %q", cl)
			w.header.Del("Content-Length")
		}
	}
}

// writeInformational sends a 1xx head at once, with the handler's headers.
func (w *response) writeInformational(code int) {
	bw := w.c.bw
	writeStatusLine(w, code)
	writeHeaderLines(w, w.header, func(k string) bool { return k == "Content-Length" || k == "Transfer-Encoding" })
	_, _ = bw.WriteString("\r\n")
	_ = bw.Flush()
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if !w.committed {
		if w.buffered+len(p) <= len(w.c.pre) {
			w.buffered += copy(w.c.pre[w.buffered:], p)
			return len(p), nil
		}
		first := w.c.pre[:w.buffered]
		if len(first) == 0 {
			first = p
		}
		w.commit(false, first)
	}
	if err := w.send(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *response) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// send writes body bytes under the framing chosen.
func (w *response) send(p []byte) error {
	bw := w.c.bw
	if w.bodyless || len(p) == 0 {
		return nil
	}
	if w.chunked {
		var hex [16]byte
		_, _ = bw.Write(strconv.AppendUint(hex[:0], uint64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		_, _ = bw.Write(p)
		_, err := bw.WriteString("\r\n")
		return err
	}
	_, err := bw.Write(p)
	return err
}

// FlushError sends the head, if it has not gone, and what is buffered.
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(false, w.c.pre[:w.buffered])
	}
	return w.c.bw.Flush()
}

func (w *response) Flush() { _ = w.FlushError() }

// SetReadDeadline and SetWriteDeadline serve http.ResponseController; the server clears
// them after the handler.
func (w *response) SetReadDeadline(t time.Time) error {
	w.c.readDL = true
	return w.c.rwc.SetReadDeadline(t)
}

func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.writeDL = true
	return w.c.rwc.SetWriteDeadline(t)
}

// BodyBuffered reports whether what is left of the request's body is in the
// connection's read buffer, declared by its Content-Length: reading it makes no read of
// the socket, so no read deadline can matter (the server's body read sets none then).
func (w *response) BodyBuffered() bool {
	b := w.body
	if b == nil || b.eof {
		return true
	}
	left := w.req.ContentLength - b.n
	return !b.expect && w.req.TransferEncoding == nil && w.req.ContentLength >= 0 && int64(w.c.br.Buffered()) >= left
}

// finish ends the response after the handler: the head if it has not gone (with a
// Content-Length when the body fit the buffer), the last chunk and trailers, a flush.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(true, w.c.pre[:w.buffered])
	} else if w.body != nil && !w.closeAfter && !w.body.drain() {
		w.closeAfter = true
	}
	if w.chunked {
		bw := w.c.bw
		_, _ = bw.WriteString("0\r\n")
		if t := w.finalTrailers(); t != nil {
			_ = t.Write(bw)
		}
		_, _ = bw.WriteString("\r\n")
	}
	if !w.bodyless && w.contentLength != -1 && w.written != w.contentLength {
		w.closeAfter = true // short of its declared length: the client would wait for the rest
	}
	_ = w.c.bw.Flush()
}

// finalTrailers are the trailers to send: the declared keys' values and the keys the
// handler set with http.TrailerPrefix.
func (w *response) finalTrailers() http.Header {
	var t http.Header
	for k, vv := range w.header {
		if kk, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if t == nil {
				t = http.Header{}
			}
			t[kk] = vv
		}
	}
	for _, k := range w.trailers {
		for _, v := range w.header[k] {
			if t == nil {
				t = http.Header{}
			}
			t.Add(k, v)
		}
	}
	return t
}

// The headers the server sets and leaves out of the handler's, a bit each.
const (
	exclContentType = 1 << iota
	exclContentLength
	exclConnection
)

// commit chooses the framing and writes the status line and headers to the write
// buffer, then the bytes held before. done: the handler has returned. first is the
// start of the body, for sniffing the Content-Type. It follows net/http's
// chunkWriter.writeHeader.
func (w *response) commit(done bool, first []byte) {
	w.committed = true
	c, req := w.c, w.req
	h := w.snap
	if h == nil {
		h = w.header
	}
	isHEAD := req.Method == http.MethodHead
	bodyOK := bodyAllowedForStatus(w.status)
	trailers := false
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			trailers = true
			break
		}
	}
	for _, v := range h["Trailer"] {
		trailers = true
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				w.trailers = append(w.trailers, http.CanonicalHeaderKey(f))
			}
		}
	}
	var excl int
	var setLength, setType, setConnection string
	if done && !trailers && bodyOK && w.contentLength == -1 && (!isHEAD || w.buffered > 0) {
		w.contentLength = int64(w.buffered)
		setLength = strconv.Itoa(w.buffered)
	}
	keepAlives := !c.s.inShut.Load()
	if w.wants10KeepAlive && keepAlives && h.Get("Content-Length") != "" && h.Get("Connection") == "keep-alive" {
		w.closeAfter = false
	}
	hasCL := w.contentLength != -1
	if w.wants10KeepAlive && (isHEAD || hasCL || !bodyOK) {
		if _, set := h["Connection"]; !set {
			setConnection = "keep-alive"
		}
	} else if !req.ProtoAtLeast(1, 1) || req.Close {
		w.closeAfter = true
	}
	if h.Get("Connection") == "close" || !keepAlives {
		w.closeAfter = true
	}
	if done && w.body != nil && !w.closeAfter && !w.body.drain() {
		w.closeAfter = true
	}
	if bodyOK {
		_, haveType := h["Content-Type"]
		if !haveType && h.Get("Content-Encoding") == "" && len(first) > 0 {
			setType = http.DetectContentType(first)
		}
	} else {
		excl |= exclContentLength
		if w.status == http.StatusNotModified {
			excl |= exclContentType
		}
	}
	w.bodyless = isHEAD || !bodyOK
	switch {
	case w.bodyless, hasCL:
	case req.ProtoAtLeast(1, 1):
		w.chunked = true
	default:
		w.closeAfter = true // HTTP/1.0 without a length: the close ends the body
	}
	if w.closeAfter && (!keepAlives || !httpguts.HeaderValuesContainsToken(h["Connection"], "close")) {
		excl |= exclConnection
		setConnection = ""
		if req.ProtoAtLeast(1, 1) {
			setConnection = "close"
		}
	}

	bw := c.bw
	writeStatusLine(w, w.status)
	writeHeaderLines(w, h, func(k string) bool {
		switch k {
		case "Transfer-Encoding":
			return true
		case "Content-Type":
			return excl&exclContentType != 0
		case "Content-Length":
			return excl&exclContentLength != 0
		case "Connection":
			return excl&exclConnection != 0
		}
		return strings.HasPrefix(k, http.TrailerPrefix)
	})
	if setType != "" {
		writeLine(bw, "Content-Type", setType)
	}
	if setConnection != "" {
		writeLine(bw, "Connection", setConnection)
	}
	if w.chunked {
		writeLine(bw, "Transfer-Encoding", "chunked")
	}
	if _, ok := h["Date"]; !ok {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(httpDate())
		_, _ = bw.WriteString("\r\n")
	}
	if setLength != "" {
		writeLine(bw, "Content-Length", setLength)
	}
	_, _ = bw.WriteString("\r\n")
	if w.buffered > 0 {
		_ = w.send(c.pre[:w.buffered])
		w.buffered = 0
	}
}

func writeStatusLine(w *response, code int) {
	bw := w.c.bw
	if w.req.ProtoAtLeast(1, 1) {
		_, _ = bw.WriteString("HTTP/1.1 ")
	} else {
		_, _ = bw.WriteString("HTTP/1.0 ")
	}
	var num [3]byte
	_, _ = bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
	_ = bw.WriteByte(' ')
	if text := http.StatusText(code); text != "" {
		_, _ = bw.WriteString(text)
	} else {
		_, _ = bw.WriteString("status code ")
		_, _ = bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
	}
	_, _ = bw.WriteString("\r\n")
}

// writeHeaderLines writes h's fields but those skip names, as http.Header.Write writes
// them (invalid names left out, line breaks in values made spaces, values trimmed), in
// the map's order.
func writeHeaderLines(w *response, h http.Header, skip func(string) bool) {
	bw := w.c.bw
	for k, vv := range h {
		if skip(k) || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			writeLine(bw, k, textproto.TrimString(v))
		}
	}
}

func writeLine(bw interface {
	WriteString(string) (int, error)
}, k, v string) {
	_, _ = bw.WriteString(k)
	_, _ = bw.WriteString(": ")
	_, _ = bw.WriteString(v)
	_, _ = bw.WriteString("\r\n")
}

// bodyAllowedForStatus is net/http's: 1xx, 204 and 304 have no body.
func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

// date is the Date header's value for one second.
type date struct {
	sec int64
	b   []byte
}

var dateCache atomic.Pointer[date]

// httpDate is the current time in http.TimeFormat, formatted once a second.
func httpDate() []byte {
	now := time.Now()
	if d := dateCache.Load(); d != nil && d.sec == now.Unix() {
		return d.b
	}
	d := &date{sec: now.Unix(), b: now.UTC().AppendFormat(nil, http.TimeFormat)}
	dateCache.Store(d)
	return d.b
}
