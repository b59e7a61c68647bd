package server

import (
	"net/http"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/request"
)

// dispatch sends a selected request to its engines and makes sure the client gets an
// answer it can act on. An attempt the engines never received (connection refused,
// breaker open) is retried on another selection without those engines, up to
// retries.max_attempts; every other failure is answered (see dispatchError.retriable for
// why). A dispatch failure does not otherwise restart selection.
func (s *Server) dispatch(rec *recorder, r *http.Request, p *request.Prepared, sel bucket.Selection, d *Decision) {
	// Every way out has answered the client. A non-streamed answer is buffered whole
	// (see newProxy): it goes out now, in one write, before the request is logged and
	// counted, and before shutdown, which waits for the active requests, may close the
	// connection.
	defer rec.flush()
	for attempt := 1; ; attempt++ {
		err := s.dispatchOnce(rec, r, p, sel)
		if err == nil {
			if rec.status == 0 { // a proxy that wrote nothing must not become an empty 200
				s.writeFailure(rec, &dispatchError{kind: failMalformed, stage: plan.RolePlain, detail: "no response written"}, d)
			}
			return
		}
		if !err.retriable() || attempt >= s.maxAttempts || rec.status != 0 {
			s.writeFailure(rec, err, d)
			return
		}
		p.Facts.Avoid = append(p.Facts.Avoid, err.worker)
		next, rerr := s.route(r, p, d)
		if rerr != nil { // nowhere else to go: the dispatch failure is the answer
			s.writeFailure(rec, err, d)
			return
		}
		s.metrics.retries.WithLabelValues(p.Model.Name).Inc()
		d.Retries++
		sel = next
	}
}

// dispatchOnce acquires the selected engines' breakers and dispatches.
func (s *Server) dispatchOnce(rec *recorder, r *http.Request, p *request.Prepared, sel bucket.Selection) *dispatchError {
	defer s.learnPrefix(p, sel, rec)()
	if !sel.Bucket.PD() {
		w := sel.Plain.Engine
		if !acquire(w) {
			return &dispatchError{kind: failBreakerOpen, stage: plan.RolePlain, worker: w}
		}
		return s.forward(rec, r, payload{head: p.Body}, w, plan.RolePlain, nil)
	}
	pre, dec := sel.Prefill.Engine, sel.Decode.Engine
	if !acquire(pre) {
		return &dispatchError{kind: failBreakerOpen, stage: plan.RolePrefill, worker: pre}
	}
	if !acquire(dec) {
		if b := pre.Breaker(); b != nil {
			b.Abandon()
		}
		return &dispatchError{kind: failBreakerOpen, stage: plan.RoleDecode, worker: dec}
	}
	if pre.KVTransfer() {
		return s.dispatchKVTransfer(rec, r, p, sel)
	}
	return s.dispatchPD(rec, r, p, sel)
}

func acquire(w *engine.Worker) bool {
	b := w.Breaker()
	return b == nil || b.Acquire()
}

// writeFailure answers a failed dispatch (unless the response already started), logs
// its details under the request id and counts it.
func (s *Server) writeFailure(rec *recorder, err *dispatchError, d *Decision) {
	status, code, msg := failureResponse(err)
	s.metrics.observeFailure(err)
	d.Error = code + ": " + err.Error()
	s.log.Warn("dispatch failed", "request_id", rec.reqID, "error", clipText(err.Error(), maxErrorText))
	if rec.status == 0 {
		writeError(rec, status, code, msg+" (request id "+rec.reqID+")")
	}
}
