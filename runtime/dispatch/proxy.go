package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/plan"
)

// maxResponseBytes caps a non-streamed engine answer, which the router reads whole
// before answering (so a cut or malformed answer is a 502, never a truncated 200).
const maxResponseBytes = 64 << 20

// payload is a request body sent to engines without copying the client's bytes: the
// body itself, or for PD the body's head and a tail with the bootstrap fields.
type payload struct {
	head, tail []byte
}

func (p payload) len() int64 { return int64(len(p.head) + len(p.tail)) }

func (p payload) getBody() (io.ReadCloser, error) { return p.reader(), nil }

func (p payload) reader() io.ReadCloser {
	if p.tail == nil {
		return io.NopCloser(bytes.NewReader(p.head))
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(p.head), bytes.NewReader(p.tail)))
}

// attempt is one dispatch to one engine. It is also the dispatch's context (the client's
// context with the dispatch's cancellation), so the generation's one ReverseProxy finds the
// attempt in every hook through the request it is handed, with nothing allocated per
// request for hooks.
type attempt struct {
	context.Context
	dp     *Dispatcher
	w      *engine.Worker
	Stage  plan.Role
	out    Writer
	body   payload
	client context.Context // the client's request context
	ctx    context.Context
	dl     *deadlines
	// prefill, for the decode half of a PD request, is where the prefill's status
	// arrives; the decode response waits for it.
	prefill *prefillStatus
	err     *Error
	judged  bool
}

// attemptKey finds the attempt in a context derived from it.
type attemptKey struct{}

// Value returns the attempt itself for attemptKey.
func (a *attempt) Value(key any) any {
	if key == (attemptKey{}) {
		return a
	}
	return a.Context.Value(key)
}

func attemptOf(r *http.Request) *attempt {
	return r.Context().Value(attemptKey{}).(*attempt)
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
func (dp *Dispatcher) forward(out Writer, r *http.Request, body payload, w *engine.Worker, stage plan.Role, pf *prefillStatus) *Error {
	guard := dp.table.Acquire(w)
	defer guard.Release()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	a := &attempt{Context: ctx, dp: dp, w: w, Stage: stage, out: out, body: body, client: r.Context(), ctx: ctx, prefill: pf}
	a.dl = dp.startDeadlines(ctx, cancel, w, stage, pf)
	defer a.dl.stop()

	// The body and the engine's headers are set by the proxy's Rewrite (see newProxy):
	// neither the client's body nor its headers are what ReverseProxy forwards.
	req := r.WithContext(a)
	req.Body, req.ContentLength, req.GetBody = nil, 0, nil
	dp.proxy.ServeHTTP(out, req)
	a.verdict(a.err)
	return a.err
}

// newProxy is the server's one ReverseProxy. Its hooks read the dispatch from the
// outgoing request's context (see attempt), and its copy buffers come from a pool, so a
// request allocates neither a proxy nor its hooks nor a 32 KiB buffer.
//
// Rewrite gives the outgoing request its body, the payload in memory. A body passed
// through ReverseProxy instead is wrapped in a reader the transport does not know to be
// in memory, so the transport writes the request headers and the body in two write
// calls, two TCP segments for the engine to wake up to; an in-memory body goes out with
// its headers in one.
//
// FlushInterval is zero: a stream (text/event-stream) is still flushed after every
// write, which ReverseProxy does for streams whatever the setting, while a
// non-streamed answer, which modifyResponse has read whole and given its length,
// goes out in one write when the handler returns. Flushing it too would start a timer
// per request that flushes the headers on their own, racing the body's write.
func (dp *Dispatcher) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			a := attemptOf(pr.In)
			pr.SetURL(a.w.Target())
			// pr.Out.Header is ReverseProxy's copy of the client's headers, hop-by-hop
			// headers already removed.
			a.dp.headers.apply(pr.Out.Header, a.out.ID())
			pr.Out.Header["Content-Length"] = []string{strconv.FormatInt(a.body.len(), 10)}
			setForwarded(pr.Out.Header, pr.In)
			pr.Out.Body, pr.Out.ContentLength, pr.Out.GetBody = a.body.reader(), a.body.len(), a.body.getBody
		},
		Transport:     dp.client.Transport,
		FlushInterval: 0,
		BufferPool:    copyBuffers{},
		ModifyResponse: func(resp *http.Response) error {
			return attemptOf(resp.Request).modifyResponse(resp)
		},
		ErrorHandler: func(_ http.ResponseWriter, r *http.Request, err error) {
			a := attemptOf(r)
			a.err = classify(a.ctx, a.client, err, a.w, a.Stage)
			if a.err.Kind == Timeout && a.err.Phase == PhaseConnect {
				a.err.After = dp.timeouts.Connect
			}
		},
		ErrorLog: slog.NewLogLogger(dp.log.Handler(), slog.LevelDebug),
	}
}

// copyBufferSize is the size of the buffers that copy response bodies to clients, the
// size ReverseProxy allocates when it has no pool.
const copyBufferSize = 32 << 10

var copyBufferPool = sync.Pool{New: func() any { return new([copyBufferSize]byte) }}

// copyBuffers lends ReverseProxy its copy buffers from copyBufferPool.
type copyBuffers struct{}

func (copyBuffers) Get() []byte { return copyBufferPool.Get().(*[copyBufferSize]byte)[:] }

func (copyBuffers) Put(b []byte) {
	if len(b) == copyBufferSize {
		copyBufferPool.Put((*[copyBufferSize]byte)(b))
	}
}

// modifyResponse runs when the engine's response headers arrive, before anything
// reaches the client. A decode response first waits for its prefill's status. An error
// status, a redirect or a non-streamed body that is cut or not JSON becomes a
// Error (answered by the caller); engine headers the client should not see are
// dropped; a stream is guarded against a cut and an idle engine.
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
		err := fail(BadStatus, logline.Clip(string(raw), logline.MaxErrorText)).(*Error)
		if err.Rejection() {
			err.EngineMsg, err.Detail = logline.Clip(engineMessage(raw), 512), ""
		}
		return err
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
		return nil
	}
	resp.Body = &idleReader{ReadCloser: resp.Body, d: a.dl}
	jb := jsonBodies.Get().(*jsonBody)
	_, err := jb.buf.ReadFrom(io.LimitReader(resp.Body, maxResponseBytes+1))
	resp.Body.Close()
	body := jb.buf.Bytes()
	switch {
	case err != nil:
		jb.Close()
		return classify(a.ctx, a.client, err, a.w, a.Stage)
	case len(body) > maxResponseBytes:
		jb.Close()
		return fail(Malformed, "answer over "+strconv.Itoa(maxResponseBytes)+" bytes")
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && !json.Valid(body):
		defer jb.Close()
		return fail(Malformed, "answer is not JSON: "+logline.Clip(string(body), 200))
	}
	a.verdict(nil)
	jb.rd.Reset(body)
	resp.Body, resp.ContentLength = jb, int64(len(body))
	delete(resp.Header, "Content-Encoding")
	resp.Header["Content-Length"] = []string{strconv.Itoa(len(body))}
	return nil
}

// jsonBody is a non-streamed answer read whole, lent from jsonBodies with its buffer and
// returned when ReverseProxy closes it after copying it to the client.
type jsonBody struct {
	buf bytes.Buffer
	rd  bytes.Reader
}

// maxPooledBody is the largest answer buffer kept for reuse; a larger one is left to the
// garbage collector, so that a rare long answer does not stay in memory.
const maxPooledBody = 1 << 20

var jsonBodies = sync.Pool{New: func() any { return new(jsonBody) }}

func (b *jsonBody) Read(p []byte) (int, error) { return b.rd.Read(p) }

// Close returns the body to the pool. ReverseProxy closes a body once it is copied.
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

// Close closes the engine's stream and returns the reader to its pool. ReverseProxy
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
