package monitor

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// maxBody bounds a health answer or load report read into memory. The largest real
// report is a vLLM /metrics exposition with histograms for many models, well under it.
const maxBody = 16 << 20

// keepBytes is the most memory an engine's poller keeps for its next answer: a load
// report is a few hundred bytes, so a buffer grown past this by one large answer is let go.
const keepBytes = 64 << 10

// errTooLarge is a report longer than maxBody.
var errTooLarge = fmt.Errorf("response longer than %d bytes", maxBody)

// fetcher GETs paths of one engine for its poll loop, one at a time. The body it returns
// is valid until the next get.
type fetcher interface {
	get(ctx context.Context, path string, timeout time.Duration) ([]byte, error)
	close()
}

// newFetcher returns how the monitor reaches e. A plain-HTTP engine reached without a
// proxy is polled over a connection of the loop's own (connFetcher): most of what a
// poll cost through http.Client was its transport's machinery (a reader and a writer
// goroutine per connection, woken for every request, and a timer and context per
// request), not the round trip. Anything else (https, a proxy from the environment, a
// client injected by tests) goes through an http.Client, and so does every engine with
// engine_transport net_http.
func (m *Monitor) newFetcher(base string) fetcher {
	if m.client != nil {
		return &clientFetcher{client: m.client, base: base}
	}
	if u := m.direct(base); u != nil {
		return newConnFetcher(base, u, m.connectTimeout)
	}
	return &clientFetcher{client: m.fallback(), base: base}
}

// direct returns base parsed when the monitor speaks to it over connections of its own
// (plain HTTP, no proxy from the environment, no client injected, engine_transport
// router), and nil when polls go through an http.Client.
func (m *Monitor) direct(base string) *url.URL {
	if m.client != nil || m.netHTTP {
		return nil
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.User != nil {
		return nil
	}
	if p, perr := http.ProxyFromEnvironment(&http.Request{URL: u}); perr != nil || p != nil {
		return nil
	}
	return u
}

// clientFetcher polls through an http.Client.
type clientFetcher struct {
	client *http.Client
	base   string
	buf    bytes.Buffer
}

func (f *clientFetcher) get(ctx context.Context, path string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	target := f.base + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	_, reason, _ := strings.Cut(resp.Status, " ")
	return readBody(&f.buf, target, resp.StatusCode, reason, resp.ContentLength, resp.Body)
}

func (f *clientFetcher) close() {}

// connFetcher polls one engine over one kept-alive HTTP/1.1 connection that only its
// loop uses: the request bytes are built once per path, the poll goroutine writes them
// and reads the answer itself (readHead parses its head), and the timeout is a
// deadline on the connection. A failed or closed connection is dropped and the next get
// dials again.
type connFetcher struct {
	base    string // for error messages
	addr    string // host:port to dial
	host    string // the Host header
	dialer  net.Dialer
	conn    net.Conn
	br      *bufio.Reader
	stopCtx func() bool // ends the context watch of conn
	reqs    map[string][]byte
	buf     bytes.Buffer
	gz      *gzip.Reader
}

func newConnFetcher(base string, u *url.URL, connectTimeout time.Duration) *connFetcher {
	return &connFetcher{
		base: base, addr: dialAddr(u), host: u.Host, reqs: map[string][]byte{},
		dialer: net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second},
	}
}

// dialAddr is the host:port a plain-HTTP URL is dialled at.
func dialAddr(u *url.URL) string {
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "80")
	}
	return u.Host
}

// request is the GET of path that polls send: gzip asked for as http.Transport asks
// for it, since a vLLM /metrics exposition is tens of KB, polled twice a second per
// engine, and compresses several times over.
func request(path, host string) []byte {
	return []byte("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: router-monitor\r\nAccept: */*\r\nAccept-Encoding: gzip\r\n\r\n")
}

func (f *connFetcher) get(ctx context.Context, path string, timeout time.Duration) ([]byte, error) {
	target := f.base + path
	reused := f.conn != nil
	body, err := f.roundTrip(ctx, path, timeout, target)
	if err != nil && reused && ctx.Err() == nil && connLost(err) {
		// The engine closed the idle connection as the request went out (uvicorn closes
		// idle ones after 5 s): nothing was answered, so ask again on a new one, as
		// http.Transport does.
		f.close()
		body, err = f.roundTrip(ctx, path, timeout, target)
	}
	if err == nil {
		return body, nil
	}
	// A non-2xx answer may leave part of its body unread, so the connection goes with
	// every failure; they are rare enough that redialling costs nothing that matters.
	f.close()
	var status statusError
	switch {
	case errors.As(err, &status):
		return nil, err
	case ctx.Err() != nil:
		return nil, fmt.Errorf("GET %s: %w", target, ctx.Err())
	}
	return nil, fmt.Errorf("GET %s: %w", target, err)
}

func (f *connFetcher) roundTrip(ctx context.Context, path string, timeout time.Duration, target string) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	if f.conn == nil {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		conn, err := f.dialer.DialContext(dctx, "tcp", f.addr)
		cancel()
		if err != nil {
			return nil, err
		}
		f.conn, f.br = conn, bufio.NewReaderSize(conn, 4096)
		// A context ended (the monitor stopping, the engine removed) interrupts a poll
		// in flight by moving the deadline to the past.
		f.stopCtx = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	}
	if err := f.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	req := f.reqs[path]
	if req == nil {
		req = request(path, f.host)
		f.reqs[path] = req
	}
	if _, err := f.conn.Write(req); err != nil {
		return nil, err
	}
	h, err := readHead(f.br)
	if err != nil {
		return nil, err
	}
	out, err := readAnswer(f.br, h, &f.buf, &f.gz, target)
	if err == nil && h.close {
		f.close() // the engine said it closes the connection
	}
	return out, err
}

// readAnswer reads the body that follows h on br into buf, decompressing it with *gz
// (made on first use and reused) when it is gzipped, and the trailer after a chunked
// one. The answer is valid until buf's next use.
func readAnswer(br *bufio.Reader, h head, buf *bytes.Buffer, gz **gzip.Reader, target string) ([]byte, error) {
	body := h.body(br)
	length := h.length
	if h.gzip {
		var err error
		if *gz == nil {
			*gz, err = gzip.NewReader(body)
		} else {
			err = (*gz).Reset(body)
		}
		if err != nil {
			return nil, fmt.Errorf("reading a gzip response: %w", err)
		}
		body = *gz
		length = -1 // the bound applies to the decompressed content
	}
	out, err := readBody(buf, target, h.status, h.reason, length, body)
	if err == nil {
		err = h.trailer(br)
	}
	return out, err
}

func (f *connFetcher) close() {
	if f.conn != nil {
		f.stopCtx()
		f.conn.Close()
		f.conn, f.br = nil, nil
	}
}

// connLost reports whether err is a kept-alive connection closed under a request.
func connLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// statusError is a complete answer that is not 2xx.
type statusError struct {
	target, status, body string
}

func (e statusError) Error() string {
	return fmt.Sprintf("GET %s: %s: %s", e.target, e.status, e.body)
}

// readBody reads a 2xx answer's body into buf, bounded by maxBody, or describes a
// non-2xx one (reason is the status line's text after the code). length is the declared
// length, -1 when unknown.
func readBody(buf *bytes.Buffer, target string, status int, reason string, length int64, body io.Reader) ([]byte, error) {
	if buf.Cap() > keepBytes {
		*buf = bytes.Buffer{} // one large answer does not hold its memory for every poll after it
	}
	buf.Reset()
	if status/100 != 2 {
		_, _ = io.Copy(buf, io.LimitReader(body, 200))
		return nil, statusError{plan.RedactURL(target), strings.TrimSpace(fmt.Sprintf("%03d %s", status, reason)), strings.TrimSpace(buf.String())}
	}
	if length > maxBody {
		return nil, errTooLarge
	}
	n, err := buf.ReadFrom(io.LimitReader(body, maxBody+1))
	if err != nil {
		return nil, err
	}
	if n > maxBody {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}
