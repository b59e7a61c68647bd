package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
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
	rec := &recorder{ResponseWriter: w, start: time.Now(), reqID: requestID(r)}
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
