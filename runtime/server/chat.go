package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
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
	w.Header().Set("X-Request-Id", rec.reqID)
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
	trace := &decision.Trace{}
	sel, err := p.resolver.Route(decision.NewContext(r.Context(), trace), &p.facts)
	s.metrics.observeSelection(p.model.Name, trace, sel, err)
	d.fromSelection(trace, sel, err)
	return sel, err
}

// finish records a finished request: metrics, the recent-decisions ring and one log line.
func (s *Server) finish(rec *recorder, d *Decision) {
	status := rec.status
	if status == 0 {
		status = statusClientClosed
	}
	d.Status, d.DurationMS = status, float64(time.Since(rec.start).Microseconds())/1000
	switch {
	case rec.failure != "":
		d.Error = rec.failure
	case d.Error == "" && rec.errCode != "":
		d.Error = rec.errCode
	}
	// A client chooses the model name and much of an error's text: the decision ring and
	// the log keep a bounded prefix of each.
	d.Model, d.Error = clipText(d.Model, maxModelText), clipText(d.Error, maxErrorText)
	s.metrics.observeRequest(d, rec)
	s.recent.add(*d)
	attrs := []any{"model", d.Model, "bucket", d.Bucket, "engines", d.Engines,
		"status", status, "duration_ms", d.DurationMS, "input_tokens", d.InputTokens}
	if d.Error != "" {
		attrs = append(attrs, "error", d.Error)
	}
	s.log.Info("request", attrs...)
}

// statusClientClosed is logged when the client went away before any response (nginx's
// convention); it is never written to a client.
const statusClientClosed = 499

// recorder remembers what was written to the client: the final status, when the first
// body byte went out (time to first token for streams), an error code, and a failure that
// ended a stream after its 200.
type recorder struct {
	http.ResponseWriter
	reqID       string
	start       time.Time
	status      int
	firstByte   time.Time
	errCode     string
	failureCode string
	failure     string
}

// streamFailure records an engine failure that ended a started stream.
func (r *recorder) streamFailure(code, msg string) { r.failureCode, r.failure = code, msg }

func (r *recorder) WriteHeader(code int) {
	// Interim 1xx responses pass through; only the final status is the request's.
	if r.status == 0 && code >= 200 {
		r.status = code
		r.errCode = r.Header().Get("X-Router-Error-Code")
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.firstByte.IsZero() {
		r.firstByte = time.Now()
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection, so streams flush at once.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Decision is one request's routing outcome, as /admin/state lists it.
type Decision struct {
	Time         time.Time         `json:"time"`
	RequestID    string            `json:"request_id,omitempty"`
	Model        string            `json:"model"`
	InputTokens  int64             `json:"input_tokens"`
	ExpectedPeak int64             `json:"expected_peak,omitempty"`
	Bucket       string            `json:"bucket,omitempty"`
	Engines      map[string]string `json:"engines,omitempty"`
	Reasons      map[string]string `json:"reasons,omitempty"`
	Fallthroughs int               `json:"fallthroughs,omitempty"`
	Retries      int               `json:"retries,omitempty"`
	Status       int               `json:"status"`
	Error        string            `json:"error,omitempty"`
	DurationMS   float64           `json:"duration_ms"`
	// Generation is the plan the request ran on (see State.Generation).
	Generation uint64 `json:"generation,omitempty"`
}

func (d *Decision) fromSelection(t *decision.Trace, sel bucket.Selection, err error) {
	// Route passes a request on only after a failed attempt, so every attempt but the
	// last was a fall-through.
	d.Fallthroughs = max(len(t.Attempts)-1, 0)
	if err != nil {
		d.Error = err.Error()
		return
	}
	d.Bucket = sel.Bucket.ID()
	d.Engines, d.Reasons = map[string]string{}, map[string]string{}
	for stage, pick := range picks(sel) {
		d.Engines[stage] = pick.Engine.ID()
		d.Reasons[stage] = pick.Reason
	}
}

func statusLabel(status int) string { return strconv.Itoa(status) }
