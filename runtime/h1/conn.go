package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// A connection's phase, which the sweeper and Shutdown read to decide what may be closed.
const (
	phaseNew    int32 = iota // accepted, waiting for the first request's first byte
	phaseHead                // reading a head, or discarding a body the handler left
	phaseActive              // a handler runs
	phaseIdle                // waiting for the next request's first byte
	phaseClosed
)

// bufSize is the size of a connection's read and write buffers, net/http's.
const bufSize = 4 << 10

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

// conn is one client connection, served by one goroutine; from waitDelay after a
// request's body, a second one, wait, holds a read pending on it (see wait).
type conn struct {
	s      *Server
	rwc    net.Conn
	remote string
	lr     limitReader
	br     *bufio.Reader
	bw     *bufio.Writer
	// ctx is every request's context on the connection: it ends when the connection
	// does (the client left, a write failed, the server closed it), not when a handler
	// returns, which saves a context, its channel and its parent's list of children a
	// request; the router's handlers end what they derive from it.
	ctx  context.Context
	stop context.CancelFunc // ends ctx: the connection is over

	phase atomic.Int32
	since atomic.Int64 // when the phase began, on the server's clock

	// waiting: the pending read is armed (at the body's end): the server's wait tick
	// starts it waitDelay after waitFrom at the earliest (pending goes from waitArmed to
	// waitStarted), and its result comes on waited.
	waiting  bool
	pending  atomic.Int32
	waitFrom atomic.Int64 // when the read was armed, on the clock of clock()
	listed   bool         // in the server's waiters; guarded by its waitMu
	waited   chan error

	// deadlines: the handler set a read or write deadline, cleared after it.
	readDL, writeDL bool
	// unread: a request body was left unread; the client may still be sending it.
	unread bool
	// afterPOST: the last request was a POST, whose client may have sent a stray CRLF
	// after the body (RFC 9112 §2.2), skipped as net/http skips it.
	afterPOST bool

	pre [bufferBeforeChunking]byte // a response's first bytes, before its framing is known
}

func (s *Server) newConn(rw net.Conn) *conn {
	c := &conn{s: s, rwc: rw, remote: rw.RemoteAddr().String()}
	c.lr.r = rw
	c.since.Store(s.now.Load())
	return c
}

// limitReader reads the connection, at most n bytes while n >= 0: the cap on a head.
type limitReader struct {
	r net.Conn
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.r.Read(p)
	}
	if l.n == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// connWriter writes to the connection; a failed write cancels the connection's
// context, as net/http's server does: the client is gone.
type connWriter struct{ c *conn }

func (w connWriter) Write(p []byte) (int, error) {
	n, err := w.c.rwc.Write(p)
	if err != nil {
		w.c.stop()
	}
	return n, err
}

// serve runs a connection from its accept.
func (c *conn) serve(base context.Context) {
	c.ctx, c.stop = context.WithCancel(base)
	c.lr.n = -1
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(&c.lr)
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(connWriter{c})
	c.waited = make(chan error, 1)
	_, err := c.br.Peek(1)
	for {
		ph := c.phase.Load()
		if err != nil || ph == phaseClosed || !c.phase.CompareAndSwap(ph, phaseHead) {
			c.finish()
			return
		}
		c.since.Store(c.s.now.Load())
		c.state(http.StateActive)
		keep := c.serveOne()
		if keep && c.phase.CompareAndSwap(phaseActive, phaseIdle) {
			c.since.Store(c.s.now.Load())
			c.state(http.StateIdle)
		} else {
			keep = false
			if c.unread {
				c.closeWriteAndWait()
			}
			_ = c.rwc.Close() // ends a pending read
		}
		if c.waiting {
			c.waiting = false
			switch {
			case !c.pending.CompareAndSwap(waitArmed, waitNone):
				err = <-c.waited // the pending read started
				c.pending.Store(waitNone)
			case keep:
				_, err = c.br.Peek(4) // it never started: this goroutine waits instead
			}
		}
		if !keep {
			c.finish()
			return
		}
	}
}

// wait is the read pending while a handler runs and after its response: it notices a
// client that leaves (cancelling the request) and is the wait for the next request,
// whose first bytes it leaves in the read buffer. It runs in a goroutine of its own,
// started by the server's wait tick, so that the serving goroutine keeps its stack,
// grown by the handler, from request to request.
func (c *conn) wait() {
	// Four bytes, as net/http's server waits for: fewer before the client's end are no
	// request worth an answer.
	_, err := c.br.Peek(4)
	if err != nil {
		c.stop()
	}
	c.waited <- err
}

// rstAvoidanceDelay is how long a connection whose client may still be sending a body
// stays open after the answer, net/http's figure: closing a socket with unread bytes
// resets it, and the reset can reach the client before it has read the answer.
const rstAvoidanceDelay = 500 * time.Millisecond

// closeWriteAndWait ends the sending side, where the connection allows it, and waits
// rstAvoidanceDelay before the close, as net/http's server does.
func (c *conn) closeWriteAndWait() {
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	time.Sleep(rstAvoidanceDelay)
}

// startWait arms the pending read; the request's body has been read to its end.
func (c *conn) startWait() {
	c.waiting = true
	c.waitFrom.Store(clock())
	c.pending.Store(waitArmed)
	c.s.armWait(c)
}

// finish closes the connection and returns its buffers. No read is pending.
func (c *conn) finish() {
	c.phase.Store(phaseClosed)
	_ = c.rwc.Close()
	if c.stop != nil {
		c.stop()
	}
	if c.br != nil {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.bw.Reset(nil)
		writers.Put(c.bw)
		c.br, c.bw = nil, nil
	}
	c.s.remove(c)
	c.state(http.StateClosed)
}

// kill closes the connection if it is still in phase from; the owning goroutine's read
// fails and it finishes the connection.
func (c *conn) kill(from int32) {
	if c.phase.CompareAndSwap(from, phaseClosed) {
		_ = c.rwc.Close()
	}
}

func (c *conn) state(st http.ConnState) {
	if c.s.ConnState != nil {
		c.s.ConnState(c.rwc, st)
	}
}

// statusError is a request refused before its handler, answered as net/http answers.
type statusError struct {
	code int
	text string
}

func (e statusError) Error() string { return fmt.Sprintf("%d %s", e.code, e.text) }

var errTooLarge = errors.New("h1: request head too large")

// readRequest reads and checks one request's head, as net/http's server does.
func (c *conn) readRequest() (*http.Request, error) {
	c.lr.n = c.s.maxHeaderBytes() + bufSize // net/http's slop for the buffer's read-ahead
	if c.afterPOST {
		peek, _ := c.br.Peek(4) // ReadRequest meets the error
		n := 0
		for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
			n++
		}
		_, _ = c.br.Discard(n)
	}
	req, err := readHTTPRequest(c.ctx, c.br)
	if err != nil {
		if c.lr.n == 0 {
			return nil, errTooLarge
		}
		return nil, err
	}
	c.lr.n = -1
	c.afterPOST = req.Method == http.MethodPost
	if req.ProtoMajor != 1 {
		// HTTP/2's preface (PRI * HTTP/2.0) included: this server speaks HTTP/1.x only.
		return nil, statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	if req.URL.Host != "" {
		// The absolute and authority forms: http.ReadRequest has dropped the Host header
		// that would say whether the client sent one, so they are refused; the router's
		// clients send the origin form.
		return nil, statusError{http.StatusBadRequest, "absolute-form request target not served"}
	}
	if req.Host == "" && req.ProtoAtLeast(1, 1) {
		return nil, statusError{http.StatusBadRequest, "missing required Host header"}
	}
	if !httpguts.ValidHostHeader(req.Host) {
		return nil, statusError{http.StatusBadRequest, "malformed Host header"}
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, statusError{http.StatusBadRequest, "invalid header name"}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, statusError{http.StatusBadRequest, "invalid header value"}
			}
		}
	}
	return req, nil
}

// refuse answers a request that failed readRequest, with net/http's answers; a client
// that left or timed out gets none.
func (c *conn) refuse(err error) {
	const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	var se statusError
	switch {
	case err == errTooLarge:
		const public = "431 Request Header Fields Too Large"
		_, _ = io.WriteString(c.rwc, "HTTP/1.1 "+public+errorHeaders+public)
	case strings.HasPrefix(err.Error(), "unsupported transfer encoding"):
		_, _ = io.WriteString(c.rwc, "HTTP/1.1 501 Not Implemented"+errorHeaders+"Unsupported transfer encoding")
	case isCommonNetReadError(err):
	case errors.As(err, &se):
		msg := fmt.Sprintf("%d %s: %s", se.code, http.StatusText(se.code), se.text)
		_, _ = io.WriteString(c.rwc, "HTTP/1.1 "+msg+errorHeaders+msg)
	default:
		const public = "400 Bad Request"
		_, _ = io.WriteString(c.rwc, "HTTP/1.1 "+public+errorHeaders+public)
	}
}

// isCommonNetReadError is net/http's test for a read error not worth an answer: the
// client left, or its head timed out.
func isCommonNetReadError(err error) bool {
	if err == io.EOF {
		return true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	oe, ok := err.(*net.OpError)
	return ok && oe.Op == "read"
}

// serveOne reads one request, runs the handler and finishes the response; it reports
// whether the connection may serve another. On return with c.waiting set, a read is
// pending that the caller must meet.
func (c *conn) serveOne() bool {
	req, err := c.readRequest()
	if err != nil {
		c.refuse(err)
		c.unread = err == errTooLarge // the client may still be sending its head
		return false
	}
	if c.s.inShut.Load() {
		return false // as net/http: a request read after shutdown began is dropped
	}
	if !c.phase.CompareAndSwap(phaseHead, phaseActive) {
		return false
	}
	req.RemoteAddr = c.remote
	w := &response{c: c, req: req, header: make(http.Header), contentLength: -1,
		wants10KeepAlive: req.ProtoMajor == 1 && req.ProtoMinor == 0 && httpguts.HeaderValuesContainsToken(req.Header["Connection"], "keep-alive")}
	expect := req.Header.Get("Expect")
	if req.Body == http.NoBody || req.Body == nil {
		c.startWait()
	} else {
		w.held = body{c: c, w: w, src: req.Body}
		w.body = &w.held
		req.Body = w.body
		if httpguts.HeaderValuesContainsToken(req.Header["Expect"], "100-continue") {
			w.body.expect = req.ProtoAtLeast(1, 1) && req.ContentLength != 0
		}
	}
	if expect != "" && !httpguts.HeaderValuesContainsToken(req.Header["Expect"], "100-continue") {
		w.header.Set("Connection", "close")
		w.WriteHeader(http.StatusExpectationFailed)
		w.finish()
		return false
	}
	if !c.handle(w, req) {
		_ = c.bw.Flush() // what was written goes; the response stays unfinished
		return false
	}
	w.finish()
	if c.readDL {
		c.readDL = false
		_ = c.rwc.SetReadDeadline(time.Time{})
	}
	if c.writeDL {
		c.writeDL = false
		_ = c.rwc.SetWriteDeadline(time.Time{})
	}
	return !w.closeAfter && c.waiting && c.bw.Buffered() == 0
}

// handle runs the handler, reporting false when it panicked; a panic other than
// http.ErrAbortHandler is logged with its stack, as net/http logs it.
func (c *conn) handle(w *response, req *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			ok = false
			if p != http.ErrAbortHandler {
				c.s.logf("h1: panic serving %v: %v\n%s", c.remote, p, debug.Stack())
			}
		}
	}()
	if req.RequestURI == "*" && req.Method == http.MethodOptions {
		w.Header().Set("Content-Length", "0") // net/http's answer to OPTIONS *
	} else {
		c.s.Handler.ServeHTTP(w, req)
	}
	return true
}

// body is a request's body as its handler sees it: the first read of a body the client
// sent Expect: 100-continue for sends the 100 Continue, and its end starts the read
// that waits for the next request. Close does not read on: what is left is discarded
// after the handler, within maxPostHandlerReadBytes, or the connection closes.
type body struct {
	c      *conn
	w      *response
	src    io.ReadCloser
	expect bool  // a 100 Continue is owed before the first read
	n      int64 // bytes read
	eof    bool
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.read(p)
}

func (b *body) read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.expect {
		b.expect = false
		if !b.w.wroteHeader {
			_, _ = b.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			_ = b.c.bw.Flush()
		}
	}
	n, err := b.src.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		b.eof = true
		b.c.startWait()
	}
	return n, err
}

func (b *body) Close() error {
	b.closed = true
	return nil
}

// maxPostHandlerReadBytes is how much of a body its handler left unread is discarded to
// keep the connection, net/http's figure.
const maxPostHandlerReadBytes = 256 << 10

// drain discards what the handler left of the body, and reports whether it reached the
// end. The discard runs in the head phase: ReadHeaderTimeout bounds a client that
// trickles it.
func (b *body) drain() bool {
	if b.eof {
		return true
	}
	c := b.c
	c.unread = true
	if b.expect {
		return false // the client waits for a 100 Continue before it sends the body
	}
	if cl := b.w.req.ContentLength; cl > 0 && cl-b.n >= maxPostHandlerReadBytes {
		return false // as net/http: too much left to read
	}
	c.since.Store(c.s.now.Load())
	if !c.phase.CompareAndSwap(phaseActive, phaseHead) {
		return false
	}
	_, err := io.CopyN(io.Discard, readerFunc(b.read), maxPostHandlerReadBytes+1)
	c.unread = err != io.EOF
	return c.phase.CompareAndSwap(phaseHead, phaseActive) && err == io.EOF
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
