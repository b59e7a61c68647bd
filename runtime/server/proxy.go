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

type targetKey struct{}

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
			w := pr.In.Context().Value(targetKey{}).(*engine.Worker)
			pr.SetURL(targets[w.ID()])
			pr.SetXForwarded()
		},
		Transport:      s.client.Transport,
		FlushInterval:  -1,
		ModifyResponse: guardStream,
		ErrorHandler:   s.proxyError,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// forward dispatches body to w's engine and copies the response to the client. The
// engine's in-flight count covers exactly the time the request is with it.
func (s *Server) forward(rw http.ResponseWriter, r *http.Request, body []byte, w *engine.Worker) {
	guard := s.table.Acquire(w)
	defer guard.Release()
	out := r.WithContext(context.WithValue(r.Context(), targetKey{}, w))
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header = r.Header.Clone()
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	out.Header.Set("Content-Type", "application/json")
	s.proxy.ServeHTTP(rw, out)
}

// proxyError answers a dispatch that failed before the engine's response started: 502
// naming the engine, or the prefill failure that cancelled a decode. A client that went
// away gets nothing.
func (s *Server) proxyError(rw http.ResponseWriter, r *http.Request, err error) {
	var pf *prefillFailure
	w := r.Context().Value(targetKey{}).(*engine.Worker)
	switch cause := context.Cause(r.Context()); {
	case errors.As(cause, &pf):
		writeError(rw, http.StatusBadGateway, codePrefillError, pf.Error())
	case r.Context().Err() != nil:
		// The client is gone; nobody reads an answer.
	default:
		writeError(rw, http.StatusBadGateway, codeEngineError, fmt.Sprintf("engine %s (%s) failed: %v", w.ID(), w.URL(), err))
	}
}

// guardStream wraps an event stream so that an engine failing mid-stream ends the
// client's stream with an OpenAI-shaped error event instead of a silent cut.
func guardStream(resp *http.Response) error {
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &streamGuard{ReadCloser: resp.Body, ctx: resp.Request.Context()}
	}
	return nil
}

type streamGuard struct {
	io.ReadCloser
	ctx     context.Context
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
	cause := context.Cause(g.ctx)
	msg, code := "", codeEngineError
	switch {
	case errors.As(cause, &pf):
		msg, code = pf.Error(), codePrefillError
	case g.ctx.Err() != nil:
		return n, err // the client is gone
	default:
		w := g.ctx.Value(targetKey{}).(*engine.Worker)
		msg = fmt.Sprintf("engine %s stream failed: %v", w.ID(), err)
	}
	event, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "code": code}})
	g.pending = append(append([]byte("\n\ndata: "), event...), "\n\n"...)
	g.failed = true
	return n, nil
}
