package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/token"
)

// routed serves an endpoint whose requests go to engines chosen by selection (chat,
// completions, generate, embeddings and the like): prepare once with the endpoint's
// preparer, select bucket-first, then dispatch. Selection failures never reach an engine;
// a dispatch failure never restarts selection.
func (s *Server) routed(prepare preparer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveRouted(w, r, prepare) }
}

func (s *Server) serveRouted(w http.ResponseWriter, r *http.Request, prepare preparer) {
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

	p, herr := prepare(rec, r)
	if herr != nil {
		d.Model, d.Error = herr.model, herr.msg
		writeError(rec, herr.status, herr.code, herr.msg)
		return
	}
	// The prompt's ids are read by selection and the prefix indexes' learning, all of
	// which are over when dispatch returns.
	defer token.Recycle(p.facts.TokenIDs)
	d.Model, d.InputTokens = p.model.Name, p.facts.InputTokens
	if p.facts.PeakKnown {
		d.ExpectedPeak = p.facts.ExpectedPeak
	}
	sel, err := s.route(r, p, d)
	if err != nil {
		var be *bucket.Error
		if !errors.As(err, &be) {
			writeError(rec, http.StatusInternalServerError, bucket.CodeInternal, err.Error())
			return
		}
		writeError(rec, be.Status(), be.Code(), be.Error())
		return
	}
	s.dispatch(rec, r, p, sel, d)
}

// route runs the selection pass and records it in metrics and the decision.
func (s *Server) route(r *http.Request, p *prepared, d *Decision) (bucket.Selection, error) {
	trace := decision.NewSummary()
	p.pass = policy.Pass{Trace: trace}
	sel, err := p.resolver.Route(r.Context(), &p.facts, &p.pass)
	s.metrics.observeSelection(p.model.Name, trace, sel, err)
	d.fromSelection(trace, sel, err)
	return sel, err
}
