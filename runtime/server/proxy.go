package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/engine"
)

// dispatch is one request's trip to one engine, carried in the outgoing request's
// context so the proxy's hooks know the engine, where to record a failure, and, for the
// decode half of a PD request, when the prefill half has answered.
type dispatch struct {
	engine *engine.Worker
	rec    *recorder
	// prefill, for a decode dispatch, delivers the prefill's status: nil once the prefill
	// engine answered 2xx, else its failure. The decode response waits for it.
	prefill <-chan error
}

type dispatchKey struct{}

func dispatchOf(ctx context.Context) *dispatch { return ctx.Value(dispatchKey{}).(*dispatch) }

// newProxy returns the reverse proxy that carries a dispatched request to the engine in
// its context. Responses flush immediately so streamed tokens reach the client as the
// engine produces them; the client's context cancels the upstream request.
func (s *Server) newProxy() *httputil.ReverseProxy {
	targets := map[string]*url.URL{}
	for _, e := range s.plan.Engines {
		u, err := url.Parse(e.URL)
		if err != nil {
			panic(fmt.Sprintf("internal error: compiled engine url %q: %v", e.URL, err))
		}
		targets[e.ID] = u
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[dispatchOf(pr.In.Context()).engine.ID()])
			pr.SetXForwarded()
		},
		Transport:      s.client.Transport,
		FlushInterval:  -1,
		ModifyResponse: modifyResponse,
		ErrorHandler:   s.proxyError,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// forward dispatches body to d's engine and copies the response to the client. The
// engine's in-flight count covers exactly the time the request is with it.
func (s *Server) forward(r *http.Request, body []byte, d *dispatch) {
	guard := s.table.Acquire(d.engine)
	defer guard.Release()
	out := r.WithContext(context.WithValue(r.Context(), dispatchKey{}, d))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header = r.Header.Clone()
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	out.Header.Set("Content-Type", "application/json")
	// The body is already read: a 100 Continue from the engine would only reach the client
	// as a stray interim response.
	out.Header.Del("Expect")
	s.proxy.ServeHTTP(d.rec, out)
}

// proxyError answers a dispatch that failed before the engine's response started: 502
// naming the engine, or the prefill failure that cancelled a decode. A client that went
// away gets nothing.
func (s *Server) proxyError(rw http.ResponseWriter, r *http.Request, err error) {
	var pf *prefillFailure
	w := dispatchOf(r.Context()).engine
	switch cause := context.Cause(r.Context()); {
	case errors.As(err, &pf), errors.As(cause, &pf):
		writeError(rw, http.StatusBadGateway, codePrefillError, pf.Error())
	case r.Context().Err() != nil:
		// The client is gone; nobody reads an answer.
	default:
		writeError(rw, http.StatusBadGateway, codeEngineError, fmt.Sprintf("engine %s (%s) failed: %v", w.ID(), w.URL(), err))
	}
}

// modifyResponse runs when an engine's response headers arrive, before anything reaches
// the client. A decode response first waits for its prefill's status, so a failed
// prefill is answered as an error rather than after a decode's 200. An engine's error
// answer becomes an OpenAI-shaped error, and an event stream is guarded against a cut.
func modifyResponse(resp *http.Response) error {
	ctx := resp.Request.Context()
	d := dispatchOf(ctx)
	if d.prefill != nil {
		select {
		case err := <-d.prefill:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if resp.StatusCode >= 400 {
		return rewriteEngineError(resp, d.engine)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &streamGuard{ReadCloser: resp.Body, ctx: ctx, d: d}
	}
	return nil
}

// rewriteEngineError turns an engine's error answer into the router's error shape: a
// 5xx becomes 502 engine_error (the engine failed after dispatch), a 4xx keeps its status
// as engine_rejected. The engine's own message is kept in the text.
func rewriteEngineError(resp *http.Response, w *engine.Worker) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	status, code := resp.StatusCode, codeEngineRejected
	if status >= 500 {
		status, code = http.StatusBadGateway, codeEngineError
	}
	msg := fmt.Sprintf("engine %s answered %s: %s", w.ID(), resp.Status, engineMessage(raw))
	body, _ := json.Marshal(errorBody(status, code, msg))
	resp.StatusCode, resp.Status = status, fmt.Sprintf("%d %s", status, http.StatusText(status))
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Encoding")
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Set("X-Router-Error-Code", code)
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

// streamGuard ends a client's event stream with an OpenAI-shaped error event when the
// engine fails mid-stream (or the PD prefill half fails), instead of a silent cut, and
// records the failure for the request's log line and metrics.
type streamGuard struct {
	io.ReadCloser
	ctx     context.Context
	d       *dispatch
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
	if err == nil || errors.Is(err, io.EOF) {
		return n, err
	}
	var pf *prefillFailure
	msg, code := "", codeEngineError
	switch cause := context.Cause(g.ctx); {
	case errors.As(cause, &pf):
		msg, code = pf.Error(), codePrefillError
	case g.ctx.Err() != nil:
		return n, err // the client is gone
	default:
		msg = fmt.Sprintf("engine %s stream failed: %v", g.d.engine.ID(), err)
	}
	g.d.rec.streamFailure(code, msg)
	event, _ := json.Marshal(errorBody(http.StatusBadGateway, code, msg))
	g.pending = append(append([]byte("\n\ndata: "), event...), "\n\n"...)
	g.failed = true
	return n, nil
}
