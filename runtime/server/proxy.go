package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/engine"
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

func (p payload) reader() io.ReadCloser {
	if p.tail == nil {
		return io.NopCloser(bytes.NewReader(p.head))
	}
	return io.NopCloser(io.MultiReader(bytes.NewReader(p.head), bytes.NewReader(p.tail)))
}

// attempt is one dispatch to one engine, passed explicitly to the proxy's hooks.
type attempt struct {
	s      *Server
	w      *engine.Worker
	stage  plan.Role
	rec    *recorder
	client context.Context // the client's request context
	ctx    context.Context
	dl     *deadlines
	// prefill, for the decode half of a PD request, is where the prefill's status
	// arrives; the decode response waits for it.
	prefill *prefillStatus
	err     *dispatchError
	judged  bool
}

// verdict reports the dispatch's outcome to the engine's breaker, once. A failure of
// another engine (the PD prefill half cancelling this decode) is no verdict on this one.
func (a *attempt) verdict(err *dispatchError) {
	b := a.w.Breaker()
	if err != nil && err.worker != a.w {
		err = &dispatchError{kind: failClientGone}
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
func (s *Server) forward(rec *recorder, r *http.Request, body payload, w *engine.Worker, stage plan.Role, pf *prefillStatus) *dispatchError {
	guard := s.table.Acquire(w)
	defer guard.Release()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stopShutdown := context.AfterFunc(s.hardStop, func() {
		cancel(&dispatchError{kind: failShutdown, stage: stage, worker: w})
	})
	defer stopShutdown()
	a := &attempt{s: s, w: w, stage: stage, rec: rec, client: r.Context(), ctx: ctx, prefill: pf}
	a.dl = s.startDeadlines(ctx, cancel, w, stage, pf)
	defer a.dl.stop()

	out := r.WithContext(ctx)
	out.Body, out.ContentLength = body.reader(), body.len()
	out.GetBody = func() (io.ReadCloser, error) { return body.reader(), nil }
	out.Header = s.headers.outbound(r.Header, rec.reqID)
	out.Header.Set("Content-Length", strconv.FormatInt(body.len(), 10))
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(w.Target())
			pr.SetXForwarded()
		},
		Transport:      s.client.Transport,
		FlushInterval:  -1,
		ModifyResponse: a.modifyResponse,
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			a.err = classify(ctx, a.client, err, w, stage)
			if a.err.kind == failTimeout && a.err.phase == phaseConnect {
				a.err.after = s.timeouts.connect
			}
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	proxy.ServeHTTP(rec, out)
	a.verdict(a.err)
	return a.err
}

// modifyResponse runs when the engine's response headers arrive, before anything
// reaches the client. A decode response first waits for its prefill's status. An error
// status, a redirect or a non-streamed body that is cut or not JSON becomes a
// dispatchError (answered by the caller); engine headers the client should not see are
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
	resp.Body = &idleReader{ReadCloser: resp.Body, d: a.dl}
	fail := func(kind failKind, detail string) error {
		resp.Body.Close()
		return &dispatchError{kind: kind, stage: a.stage, worker: a.w, status: resp.StatusCode, detail: detail}
	}
	switch code := resp.StatusCode; {
	case code >= 400:
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		err := fail(failStatus, clipText(string(raw), maxErrorText)).(*dispatchError)
		if err.rejection() {
			err.engineMsg, err.detail = clipText(engineMessage(raw), 512), ""
		}
		return err
	case code >= 300 || code < 200:
		return fail(failMalformed, "engine answered "+resp.Status+" "+resp.Header.Get("Location"))
	}
	filterResponseHeaders(resp.Header)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The client's 200 goes out with the stream's first byte, so an engine that
		// answers garbage is a 502 rather than a stream no client can parse.
		br := bufio.NewReader(resp.Body)
		first, err := br.Peek(1)
		switch {
		case err != nil && err != io.EOF:
			resp.Body.Close()
			return classify(a.ctx, a.client, err, a.w, a.stage)
		case len(first) == 1 && !strings.ContainsRune("deir:\r\n", rune(first[0])):
			return fail(failMalformed, "event stream starts with "+strconv.Quote(string(first)))
		}
		a.verdict(nil)
		resp.Body = &streamGuard{ReadCloser: readCloser{br, resp.Body}, a: a}
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	resp.Body.Close()
	switch {
	case err != nil:
		return classify(a.ctx, a.client, err, a.w, a.stage)
	case len(body) > maxResponseBytes:
		return fail(failMalformed, "answer over "+strconv.Itoa(maxResponseBytes)+" bytes")
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && !json.Valid(body):
		return fail(failMalformed, "answer is not JSON: "+clipText(string(body), 200))
	}
	a.verdict(nil)
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Encoding")
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// readCloser reads through a buffer and closes the underlying body.
type readCloser struct {
	io.Reader
	io.Closer
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

// streamGuard ends a client's event stream with an OpenAI-shaped error event when the
// engine fails mid-stream, a deadline passes, the PD prefill half fails or shutdown
// cuts it, instead of a silent cut, and records the failure for the log and metrics.
type streamGuard struct {
	io.ReadCloser
	a       *attempt
	pending []byte
	failed  bool
}

func (g *streamGuard) Read(p []byte) (int, error) {
	if g.failed {
		if len(g.pending) == 0 {
			return 0, io.EOF
		}
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		return n, nil
	}
	n, err := g.ReadCloser.Read(p)
	if err == nil || err == io.EOF {
		return n, err
	}
	de := classify(g.a.ctx, g.a.client, err, g.a.w, g.a.stage)
	if de.kind == failClientGone {
		return n, err
	}
	g.a.verdict(de)
	g.a.s.metrics.observeFailure(de)
	_, code, msg := failureResponse(de)
	g.a.rec.streamFailure(code, de.Error())
	event, _ := json.Marshal(errorBody(http.StatusBadGateway, code, msg+" (request id "+g.a.rec.reqID+")"))
	g.pending = append(append([]byte("\n\ndata: "), event...), "\n\n"...)
	g.failed = true
	return n, nil
}
