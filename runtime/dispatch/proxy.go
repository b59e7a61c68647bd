package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/strictjson"
)

// maxResponseBytes caps a non-streamed engine answer, which the router reads whole
// before answering (so a cut or malformed answer is a 502, never a truncated 200).
const maxResponseBytes = 64 << 20

// attempt is one dispatch to one engine: where it goes, what it sends, and its deadlines
// and breaker verdict. It is a local of forward, handed explicitly to each step (as
// Caddy's reverse proxy keeps its per-request state in locals and calls its transport
// itself), so a reader can follow a body to its engine and back.
type attempt struct {
	dp     *Dispatcher
	w      *engine.Worker
	Stage  plan.Role
	out    Writer
	body   payload
	route  string          // the client's path, which the engine gets under its URL
	client context.Context // the client's request context: done only when the client left
	ctx    context.Context // the dispatch's: the client's with the deadlines' (and PD's) cancellation
	dl     *deadlines
	// prefill, for the decode half of a PD request, is where the prefill's status
	// arrives; the decode response waits for it.
	prefill *prefillStatus
	judged  bool
}

// verdict reports the dispatch's outcome to the engine's breaker, once. A failure of
// another engine (the PD prefill half cancelling this decode) is no verdict on this one.
func (a *attempt) verdict(err *Error) {
	b := a.w.Breaker()
	if err != nil && err.Worker != a.w {
		err = &Error{Kind: ClientGone}
	}
	if b == nil || a.judged {
		if b != nil && err != nil && err.breakerFailure() {
			b.Failure() // a stream failing after a good start still counts
		}
		return
	}
	a.judged = true
	switch {
	case err == nil:
		b.Success()
	case err.breakerFailure():
		b.Failure()
	default:
		b.Abandon()
	}
}

// forward dispatches body to w, whose breaker the caller has acquired, and copies the
// response to the client. It returns the failure when nothing usable reached the client;
// a stream that fails after its start ends with an error event and returns nil. The
// engine's in-flight count covers exactly the time the request is with it.
//
// The dispatch runs under ctx: r's own context, or for a PD decode half the PD request's,
// which the prefill half cancels when it fails. Whether the client left is read from r's
// context alone: the PD context's cancellation is visible before its cause reaches the
// dispatch's context (a parent's Err is set before its children are cancelled), and a
// decode engine failing in that moment, as it does when its prefill fails, would
// otherwise be answered 499 to a client still waiting.
func (dp *Dispatcher) forward(ctx context.Context, out Writer, r *http.Request, body payload, w *engine.Worker, stage plan.Role, pf *prefillStatus) *Error {
	guard := dp.table.Acquire(w)
	defer guard.Release()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a := &attempt{dp: dp, w: w, Stage: stage, out: out, body: body, route: r.URL.Path, client: r.Context(), ctx: ctx, prefill: pf}
	a.dl = dp.startDeadlines(ctx, cancel, w, stage, pf)
	defer a.dl.stop()
	err := a.proxy(r)
	a.verdict(err)
	return err
}

// proxy sends the attempt's body to its engine on the client's method, path and query,
// and copies the engine's answer to the client, as httputil.ReverseProxy does (the
// router used it until the attempt became explicit; these steps keep its behaviour):
// the outgoing request gets the header policy's headers, the forwarding headers and no
// default User-Agent; an informational (1xx) answer reaches the client when the
// net_http engine transport carries it (the router's own transport skips 1xx answers, so
// the trace hook below is called only there); the response
// headers go out once modifyResponse accepted them; a stream (text/event-stream, or an
// answer of unknown length) is flushed after every write, while a non-streamed answer,
// which modifyResponse read whole and gave its length, goes out in one write when the
// handler returns; trailers follow the body; and a copy that fails after the headers
// went out aborts the client's connection (http.ErrAbortHandler), the only way left to
// tell a client the answer is cut.
func (a *attempt) proxy(in *http.Request) *Error {
	req := a.request(a.ctx, in)
	var relay *relay1xx
	if c, ok := a.dp.client.Transport.(interface{ Carries(*http.Request) bool }); !ok || !c.Carries(req) {
		// A transport that may deliver 1xx answers (net/http's) gets the trace hook, in
		// a shallow copy of the request; the router's own, which skips them, does not:
		// the hook, its context and its lock are five allocations a request.
		relay = &relay1xx{out: a.out}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{Got1xxResponse: relay.got}))
	}
	resp, err := a.dp.client.Transport.RoundTrip(req)
	if relay != nil {
		relay.done()
	}
	if err != nil {
		return a.failure(err)
	}
	removeHopByHop(resp.Header)
	if err := a.modifyResponse(resp); err != nil {
		resp.Body.Close()
		return a.failure(err)
	}
	copyHeader(a.out.Header(), resp.Header)
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		a.out.Header().Add("Trailer", strings.Join(keys, ", "))
	}
	a.out.WriteHeader(resp.StatusCode)
	if err := a.copyBody(resp); err != nil {
		defer resp.Body.Close()
		if in.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler) // net/http recovers it and closes the connection
		}
		return nil
	}
	resp.Body.Close() // now rather than deferred: closing fills resp.Trailer
	if len(resp.Trailer) > 0 {
		_ = http.NewResponseController(a.out).Flush() // chunked, so the trailers can follow
	}
	if len(resp.Trailer) == announced {
		if announced > 0 { // Header() after WriteHeader makes the writer copy its headers
			copyHeader(a.out.Header(), resp.Trailer)
		}
		return nil
	}
	for k, vv := range resp.Trailer {
		for _, v := range vv {
			a.out.Header().Add(http.TrailerPrefix+k, v)
		}
	}
	return nil
}

// relay1xx passes an engine's informational (1xx) answers to the client until the
// final answer's headers arrive.
type relay1xx struct {
	out       Writer
	mu        sync.Mutex
	roundDone bool
}

func (r *relay1xx) got(code int, header textproto.MIMEHeader) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.roundDone {
		return nil
	}
	h := r.out.Header()
	copyHeader(h, http.Header(header))
	r.out.WriteHeader(code)
	clear(h)
	return nil
}

// done stops the relay: the final answer's headers are the proxy's to send.
func (r *relay1xx) done() {
	r.mu.Lock()
	r.roundDone = true
	r.mu.Unlock()
}

// failure classifies a failure of the attempt (see classify), naming the connect
// timeout's length.
func (a *attempt) failure(err error) *Error {
	e := classify(a.ctx, a.client, err, a.w, a.Stage)
	if e.Kind == Timeout && e.Phase == PhaseConnect {
		e.After = a.dp.timeouts.Connect
	}
	return e
}

// copyBody copies the answer's body to the client with a pooled buffer, flushing after
// every write for a stream (see proxy). It returns the first write error, or a read
// error (the stream reader turns engine failures into an error event instead).
func (a *attempt) copyBody(resp *http.Response) error {
	flush := func() {}
	if isEventStream(resp.Header.Get("Content-Type")) || resp.ContentLength == -1 {
		rc := http.NewResponseController(a.out)
		flush = func() { _ = rc.Flush() }
	}
	buf := copyBufferPool.Get().(*[copyBufferSize]byte)
	defer copyBufferPool.Put(buf)
	for {
		n, rerr := resp.Body.Read(buf[:])
		if rerr != nil && rerr != io.EOF && rerr != context.Canceled {
			a.dp.log.Debug("dispatch: read error during body copy", "request_id", a.out.ID(), "error", rerr)
		}
		if n > 0 {
			nw, werr := a.out.Write(buf[:n])
			if werr != nil {
				return werr
			}
			if nw != n {
				return io.ErrShortWrite
			}
			flush()
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// isEventStream reports whether a Content-Type names text/event-stream, whatever its
// parameters: the media type as mime.ParseMediaType reads it, without the map of
// parameters it allocates for every answer (and without refusing a stream whose
// parameters repeat, which it would).
func isEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// copyBufferSize is the size of the buffers that copy response bodies to clients, the
// size ReverseProxy allocated for each copy.
const copyBufferSize = 32 << 10

var copyBufferPool = sync.Pool{New: func() any { return new([copyBufferSize]byte) }}

// modifyResponse runs when the engine's response headers arrive, before anything
// reaches the client. A decode response first waits for its prefill's status. An error
// status, a redirect or a non-streamed body that is cut or not JSON becomes a
// Error (answered by the caller); engine headers the client should not see are
// dropped; a stream is guarded against a cut and an idle engine. It runs on the
// engine's headers with the hop-by-hop ones removed.
func (a *attempt) modifyResponse(resp *http.Response) error {
	a.dl.gotHeaders()
	if a.prefill != nil {
		if err := a.prefill.wait(a.ctx); err != nil {
			resp.Body.Close()
			return err
		}
	}
	a.dl.headers()
	fail := func(kind Kind, detail string) error {
		resp.Body.Close()
		return &Error{Kind: kind, Stage: a.Stage, Worker: a.w, Status: resp.StatusCode, Detail: detail}
	}
	switch code := resp.StatusCode; {
	case code >= 400:
		raw, _ := io.ReadAll(io.LimitReader(&idleReader{ReadCloser: resp.Body, d: a.dl}, 64<<10))
		resp.Body.Close()
		return statusFailure(a.w, a.Stage, a.route, code, raw)
	case code >= 300 || code < 200:
		return fail(Malformed, "engine answered "+resp.Status+" "+resp.Header.Get("Location"))
	}
	filterResponseHeaders(resp.Header)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The client's 200 goes out with the stream's first bytes, so an engine that
		// answers garbage is a 502 rather than a stream no client can parse.
		sb := streamBodies.Get().(*streamBody)
		sb.body, sb.a = resp.Body, a
		n, err := io.ReadAtLeast(resp.Body, sb.head[:], 1)
		sb.end = n
		switch {
		case err != nil && err != io.EOF:
			sb.release()
			resp.Body.Close()
			return classify(a.ctx, a.client, err, a.w, a.Stage)
		case n > 0 && !strings.ContainsRune("deir:\r\n", rune(sb.head[0])):
			first := string(sb.head[:1])
			sb.release()
			return fail(Malformed, "event stream starts with "+strconv.Quote(first))
		}
		if n > 0 {
			a.dl.progress()
		}
		a.verdict(nil)
		resp.Body = sb
		if lp := a.prefillLogprobs(); lp != nil {
			resp.Body = &logprobEvents{src: sb, pre: lp}
		}
		return nil
	}
	jb := jsonBodies.Get().(*jsonBody)
	jb.src = idleReader{ReadCloser: resp.Body, d: a.dl}
	_, err := jb.buf.ReadFrom(io.LimitReader(&jb.src, maxResponseBytes+1))
	resp.Body.Close()
	jb.src = idleReader{} // the pooled body keeps nothing of this request's engine
	body := jb.buf.Bytes()
	switch {
	case err != nil:
		jb.Close()
		return classify(a.ctx, a.client, err, a.w, a.Stage)
	case len(body) > maxResponseBytes:
		jb.Close()
		return fail(Malformed, "answer over "+strconv.Itoa(maxResponseBytes)+" bytes")
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && !strictjson.Valid(body):
		defer jb.Close()
		return fail(Malformed, "answer is not JSON: "+logline.Clip(string(body), 200))
	}
	a.verdict(nil)
	if lp := a.prefillLogprobs(); lp != nil {
		body = mergeLogprobs(body, lp)
	}
	jb.rd.Reset(body)
	resp.Body, resp.ContentLength = jb, int64(len(body))
	delete(resp.Header, "Content-Encoding")
	resp.Header["Content-Length"] = []string{strconv.Itoa(len(body))}
	return nil
}

// jsonBody is a non-streamed answer read whole, lent from jsonBodies with its buffer and
// returned when the proxy closes it after copying it to the client.
type jsonBody struct {
	buf bytes.Buffer
	rd  bytes.Reader
	src idleReader // the engine's body while it is read into buf
}

// maxPooledBody is the largest answer buffer kept for reuse; a larger one is left to the
// garbage collector, so that a rare long answer does not stay in memory.
const maxPooledBody = 1 << 20

var jsonBodies = sync.Pool{New: func() any { return new(jsonBody) }}

func (b *jsonBody) Read(p []byte) (int, error) { return b.rd.Read(p) }

// Close returns the body to the pool. The proxy closes a body once it is copied.
func (b *jsonBody) Close() error {
	b.rd.Reset(nil)
	if b.buf.Cap() <= maxPooledBody {
		b.buf.Reset()
		jsonBodies.Put(b)
	}
	return nil
}

// engineMessage extracts the message of an OpenAI-shaped or SGLang-shaped error body, or
// returns the body's text.
func engineMessage(raw []byte) string {
	var shaped struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &shaped) == nil {
		if shaped.Error.Message != "" {
			return shaped.Error.Message
		}
		if shaped.Message != "" {
			return shaped.Message
		}
	}
	return strings.TrimSpace(string(raw))
}

// streamHead is the most of a stream modifyResponse reads before the client's 200 goes
// out: an engine's first event, and any that came with it, so that what the engine sent
// at once goes to the client in one write.
const streamHead = 4 << 10

// streamBodies are the stream readers, with their buffers, returned when a stream is
// closed.
var streamBodies = sync.Pool{New: func() any { return new(streamBody) }}

// streamBody is an engine's event stream on its way to the client, in one reader rather
// than a layer per concern, since every chunk passes through it. It holds the first
// bytes, read before the client's 200 to check that they start an event stream; it
// restarts the idle deadline on every read that returned data; and it ends the client's
// stream with an OpenAI-shaped error event when the engine fails mid-stream, a deadline
// passes, the PD prefill half fails or shutdown cuts it, instead of a silent cut, and
// records the failure for the log and metrics.
type streamBody struct {
	body       io.ReadCloser
	a          *attempt
	head       [streamHead]byte
	start, end int // head[start:end] is still to be read
	pending    []byte
	failed     bool
}

// Close closes the engine's stream and returns the reader to its pool. The proxy
// closes it once, when the copy is over, and reads it no more; a second Close is
// refused rather than putting the reader in the pool twice, where two streams would
// share it.
func (b *streamBody) Close() error {
	if b.body == nil {
		return net.ErrClosed
	}
	err := b.body.Close()
	b.release()
	return err
}

// release returns the reader to its pool; its buffer's bytes are left to be overwritten.
func (b *streamBody) release() {
	b.body, b.a, b.pending = nil, nil, nil
	b.start, b.end, b.failed = 0, 0, false
	streamBodies.Put(b)
}

func (b *streamBody) Read(p []byte) (int, error) {
	if b.start < b.end {
		n := copy(p, b.head[b.start:b.end])
		b.start += n
		return n, nil
	}
	if b.failed {
		if len(b.pending) == 0 {
			return 0, io.EOF
		}
		n := copy(p, b.pending)
		b.pending = b.pending[n:]
		return n, nil
	}
	n, err := b.body.Read(p)
	if n > 0 {
		b.a.dl.progress()
	}
	if err == nil || err == io.EOF {
		return n, err
	}
	a := b.a
	de := classify(a.ctx, a.client, err, a.w, a.Stage)
	if de.Kind == ClientGone {
		return n, err
	}
	a.verdict(de)
	b.pending = append(append([]byte("\n\ndata: "), a.out.StreamFailed(de)...), "\n\n"...)
	b.failed = true
	return n, nil
}

// hopHeaders, removeHopByHop and copyHeader are net/http/httputil's (Copyright The Go
// Authors, BSD-style license), as proxy keeps ReverseProxy's behaviour.

// hopHeaders are the hop-by-hop headers an engine's answer never passes on, in canonical
// form, which removeHopByHop deletes without Del's canonicalizing of each.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopByHop removes the hop-by-hop headers and those the Connection header names.
func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		delete(h, f)
	}
}

// copyHeader adds src's values to dst. A key dst lacks takes src's values without a
// copy, capped so that a later Add to either copies them first.
func copyHeader(dst, src http.Header) {
	for k, vv := range src {
		if _, ok := dst[k]; !ok && len(vv) > 0 && http.CanonicalHeaderKey(k) == k {
			dst[k] = vv[:len(vv):len(vv)]
			continue
		}
		for _, v := range vv {
			dst.Add(k, v)
		}
	}
}

// clientResponseHeaders are the engine response headers a client gets. Anything else
// (Set-Cookie, Server, Location, engine-internal headers) stays with the router: a
// client talks to the router, not to the engine behind it.
var clientResponseHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true,
	"Cache-Control": true, "X-Accel-Buffering": true, "Retry-After": true,
}

func filterResponseHeaders(h http.Header) {
	for k := range h {
		if !clientResponseHeaders[k] {
			delete(h, k)
		}
	}
}
