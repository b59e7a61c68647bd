package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/token"
)

// routed serves an endpoint whose requests go to engines chosen by selection (chat,
// completions, generate, embeddings and the like): prepare once with the endpoint's
// preparer, select bucket-first, then dispatch. Selection failures never reach an engine;
// a dispatch failure never restarts selection.
func (s *Server) routed(prepare request.Preparer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveRouted(w, r, prepare) }
}

func (s *Server) serveRouted(w http.ResponseWriter, r *http.Request, prepare request.Preparer) {
	rec := &recorder{ResponseWriter: w, start: time.Now(), reqID: requestID(r), metrics: s.metrics}
	h := w.Header()
	h["X-Request-Id"], h["Date"] = []string{rec.reqID}, responseDate.at(rec.start)
	d := &Decision{Time: rec.start, RequestID: rec.reqID, Generation: s.generation}
	defer s.finish(rec, d)
	if !s.active.enter() {
		d.Error = codeOverCapacity
		writeError(rec, http.StatusServiceUnavailable, codeOverCapacity, fmt.Sprintf("the router is serving its maximum of %d requests; retry later", cap(s.active.slots)))
		return
	}
	defer s.active.leave()

	p, err := s.prepare(rec, r, prepare)
	if err != nil {
		if re, ok := errors.AsType[*request.Error](err); ok {
			d.Model = re.Model
		}
		d.Error = err.Error()
		writeErr(rec, err)
		return
	}
	// The prompt's ids are read by selection and the prefix indexes' learning, all of
	// which are over when dispatch returns.
	defer token.Recycle(p.Facts.TokenIDs)
	d.Model, d.InputTokens = p.Model.Name, p.Facts.InputTokens
	if p.Facts.PeakKnown {
		d.ExpectedPeak = p.Facts.ExpectedPeak
	}
	sel, err := s.route(r, p, d)
	if err != nil {
		writeErr(rec, err)
		return
	}
	s.dispatch(rec, r, p, sel, d)
}

// dispatch hands a selected request to the generation's dispatcher, retries on
// another selection what it asks to, and answers its failure.
func (s *Server) dispatch(rec *recorder, r *http.Request, p *request.Prepared, sel bucket.Selection, d *Decision) {
	// Every way out has answered the client. A non-streamed answer is buffered whole
	// (see package dispatch): it goes out now, in one write, before the request is logged
	// and counted, and before shutdown, which waits for the active requests, may close
	// the connection.
	defer rec.flush()
	err := s.dispatcher.Do(rec, r, p, sel, func() (bucket.Selection, error) {
		next, err := s.route(r, p, d)
		if err == nil {
			s.metrics.retries.WithLabelValues(p.Model.Name).Inc()
			d.Retries++
		}
		return next, err
	})
	if err != nil {
		s.writeFailure(rec, err, d)
	}
}

// writeFailure answers a failed dispatch (unless the response already started), logs
// its details under the request id and counts it.
func (s *Server) writeFailure(rec *recorder, err *dispatch.Error, d *Decision) {
	status, code, msg := statusOf(err)
	s.metrics.observeFailure(err)
	d.Error = code + ": " + err.Error()
	s.log.Warn("dispatch failed", "request_id", rec.reqID, "error", logline.Clip(err.Error(), logline.MaxErrorText))
	if rec.status == 0 {
		writeError(rec, status, code, msg+" (request id "+rec.reqID+")")
	}
}

// prepare reads the request's body and prepares it with the endpoint's preparer.
func (s *Server) prepare(w http.ResponseWriter, r *http.Request, prepare request.Preparer) (*request.Prepared, error) {
	body, herr := s.readBody(w, r)
	if herr != nil {
		return nil, herr
	}
	return prepare(r, body)
}

// route runs the selection pass and records it in metrics and the decision.
func (s *Server) route(r *http.Request, p *request.Prepared, d *Decision) (bucket.Selection, error) {
	trace := decision.NewSummary()
	p.Pass = policy.Pass{Trace: trace}
	sel, err := p.Resolver.Route(r.Context(), &p.Facts, &p.Pass)
	s.metrics.observeSelection(p.Model.Name, trace, sel, err)
	d.fromSelection(trace, sel, err)
	return sel, err
}
