package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/gcpace"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/slo"
	"github.com/routerkit/router/runtime/token"
)

// routed serves an endpoint whose requests go to engines chosen by selection (chat,
// completions, generate, embeddings and the like): prepare once with the endpoint's
// preparer, select bucket-first, then dispatch. Selection failures never reach an engine;
// a dispatch failure never restarts selection.
func (s *generation) routed(prepare request.Preparer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveRouted(w, r, prepare) }
}

// routedRequest is a routed request's recorder, decision record and request id header
// value, allocated together: nothing of it is pooled, as the response's headers and the
// handlers it was given may keep parts of it.
type routedRequest struct {
	rec recorder
	d   record
	id  [1]string
}

func (s *generation) serveRouted(w http.ResponseWriter, r *http.Request, prepare request.Preparer) {
	rr := &routedRequest{rec: recorder{ResponseWriter: w, start: time.Now(), metrics: s.metrics}}
	rec, d := &rr.rec, &rr.d
	rec.reqID, rec.idReplaced = s.edge.ids.From(r)
	rr.id[0] = rec.reqID
	h := w.Header()
	h["X-Request-Id"], h["Date"] = rr.id[:], responseDate.at(rec.start)
	d.Decision = control.Decision{Time: rec.start, RequestID: rec.reqID, Generation: s.number}
	r = s.startSpan(r, rec, d)
	defer s.finish(rec, d)
	if !s.active.enter() {
		s.refuseArrival(rec, d)
		return
	}
	defer s.active.leave()

	p, err := s.prepare(rec, r, prepare)
	if err != nil {
		if re, ok := errors.AsType[*request.Error](err); ok {
			d.Model = re.Model
		}
		d.Error = err.Error()
		answer.WriteErr(rec, err)
		return
	}
	// The prompt's ids are read by selection and the prefix indexes' learning, all of
	// which are over when dispatch returns.
	defer token.Recycle(p.Facts.TokenIDs)
	d.Model, d.InputTokens = p.Model.Name, p.Facts.InputTokens
	if p.Facts.PeakKnown {
		d.ExpectedPeak = p.Facts.ExpectedPeak
	}
	sel, ticket, err := s.admit(r, p, d)
	defer leave(ticket)
	if err != nil {
		answer.WriteErr(rec, err)
		return
	}
	rec.measure(p, sel)
	s.setEngineHeader(h, sel)
	s.dispatch(rec, r, p, sel, d)
}

// dispatch hands a selected request to the generation's dispatcher, retries on
// another selection what it asks to, and answers its failure.
func (s *generation) dispatch(rec *recorder, r *http.Request, p *request.Prepared, sel bucket.Selection, d *record) {
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
			rec.measure(p, next)
			s.setEngineHeader(rec.Header(), next)
		}
		return next, err
	})
	if err != nil {
		s.writeFailure(rec, err, d)
	}
}

// writeFailure answers a failed dispatch (unless the response already started), logs
// its details under the request id and counts it.
func (s *generation) writeFailure(rec *recorder, err *dispatch.Error, d *record) {
	status, code, msg := answer.StatusOf(err)
	s.metrics.observeFailure(err)
	d.Error = code + ": " + err.Error()
	s.log.Warn("dispatch failed", "request_id", rec.reqID, "error", logline.Clip(err.Error(), logline.MaxErrorText))
	if rec.status == 0 {
		answer.Write(rec, status, code, msg+" (request id "+rec.reqID+")")
	}
}

// prepare reads the request's body and prepares it with the endpoint's preparer.
func (s *generation) prepare(w http.ResponseWriter, r *http.Request, prepare request.Preparer) (*request.Prepared, error) {
	body, herr := s.ReadBody(w, r)
	if herr != nil {
		return nil, herr
	}
	return prepare(r, body)
}

// route runs the selection pass and records it in metrics and the decision.
func (s *generation) route(r *http.Request, p *request.Prepared, d *record) (bucket.Selection, error) {
	trace := decision.NewSummary()
	p.Pass = policy.Pass{Trace: trace}
	sel, err := p.Resolver.Route(r.Context(), &p.Facts, &p.Pass)
	s.metrics.observeSelection(p.Model.Name, trace, sel, err)
	d.fromSelection(trace, sel, err)
	return sel, err
}

// dateHeader is the Date of the router's responses: net/http would format it anew for
// every response (the engine's own is not passed on), which was about half a percent
// of the router's CPU per request; it changes once a second.
type dateHeader struct{ cur atomic.Pointer[dateValue] }

type dateValue struct {
	sec int64
	v   []string // cap 1: a header Add appends to a copy, never to the shared value
}

var responseDate dateHeader

// at returns the header value for t, formatting it when the second changed.
func (d *dateHeader) at(t time.Time) []string {
	sec := t.Unix()
	if cur := d.cur.Load(); cur != nil && cur.sec == sec {
		return cur.v
	}
	v := &dateValue{sec: sec, v: []string{t.UTC().Format(http.TimeFormat)}}
	d.cur.Store(v)
	return v.v[:1:1]
}

// bodyBuffered reports whether the client server (h1) holds the rest of the request's
// body in its read buffer, as a short request's body arrives with its head: its read
// then needs no deadline, and setting and clearing one is two timer changes a request.
// net/http's server does not say, and gets the deadline.
func bodyBuffered(w http.ResponseWriter) bool {
	for {
		switch v := w.(type) {
		case interface{ BodyBuffered() bool }:
			return v.BodyBuffered()
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return false
		}
	}
}

// preallocMax is the most ReadBody allocates before the body's bytes arrive.
const preallocMax = 1 << 20

// ReadBody reads a client's request body within limits.body_read_ms and the body size
// cap, in one allocation when the client declares its length: the body is read once and
// every later step (decoding, dispatch to both PD halves) works on these bytes.
func (s *generation) ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, *answer.Error) {
	timedOut := false
	if !bodyBuffered(w) {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.timeouts.BodyRead))
		defer func() {
			// After a timeout the deadline stays passed and the connection closes after
			// the answer: the server would otherwise wait for the rest of the body to
			// keep it.
			if !timedOut {
				_ = rc.SetReadDeadline(time.Time{})
			}
		}()
	}
	if r.ContentLength > request.MaxBodyBytes {
		return nil, &answer.Error{Status: http.StatusRequestEntityTooLarge, Code: answer.CodeBodyTooLarge, Msg: fmt.Sprintf("request body exceeds %d bytes", request.MaxBodyBytes)}
	}
	// The declared length is trusted only once the client has sent the first
	// preallocMax bytes: a client declaring 32 MiB and sending nothing costs little.
	want := 0
	if r.ContentLength > 0 {
		want = int(r.ContentLength) + 1 // +1: reading EOF needs no growth
	}
	buf := make([]byte, 0, min(max(want, 512), preallocMax))
	body := http.MaxBytesReader(w, r.Body, request.MaxBodyBytes)
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			gcpace.Note(len(buf)) // a long prompt's garbage needs a higher floor
			return buf, nil
		}
		if err != nil {
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				return nil, &answer.Error{Status: http.StatusRequestEntityTooLarge, Code: answer.CodeBodyTooLarge, Msg: fmt.Sprintf("request body exceeds %d bytes", request.MaxBodyBytes)}
			case errors.Is(err, os.ErrDeadlineExceeded):
				timedOut = true
				w.Header().Set("Connection", "close")
				s.metrics.timeouts.WithLabelValues("client", dispatch.PhaseBodyRead).Inc()
				return nil, &answer.Error{Status: http.StatusRequestTimeout, Code: answer.CodeBodyTimeout, Msg: fmt.Sprintf("request body not received within %v", s.timeouts.BodyRead)}
			}
			return nil, &answer.Error{Status: http.StatusBadRequest, Code: answer.CodeInvalidRequest, Msg: "reading request body: " + err.Error()}
		}
		if len(buf) == cap(buf) {
			if want > cap(buf) {
				buf = append(make([]byte, 0, want), buf...)
			} else {
				buf = append(buf, 0)[:len(buf)] // grow
			}
		}
	}
}

// recorder remembers what was written to the client: the final status, when the first
// body byte went out (time to first token for streams), an error code, and a failure that
// ended a stream after its 200.
type recorder struct {
	http.ResponseWriter
	metrics *metrics
	reqID   string
	// idReplaced reports the client's request id was refused (reqid.Valid) and reqID is
	// the router's.
	idReplaced bool
	// span is the request's span (runtime/tracing); nil when tracing is off.
	span        trace.Span
	start       time.Time
	status      int
	firstByte   time.Time
	errCode     string
	failureCode string
	failure     string
	// slo measures a streamed response for the learned SLO estimates of the bucket that
	// serves it; nil when it is not streamed or the bucket does not learn.
	slo *slo.Stream
}

// measure starts measuring the response for the learned estimates of sel's bucket, when
// the request streams: only a stream's first event is its time to first token.
func (r *recorder) measure(p *request.Prepared, sel bucket.Selection) {
	r.slo = nil
	if p.Stream {
		r.slo = slo.NewStream(sel.Bucket.Estimates(), r.start, nil)
	}
}

// ID is the request's id.
func (r *recorder) ID() string { return r.reqID }

// Status is the final status written, 0 before any.
func (r *recorder) Status() int { return r.status }

// Served reports whether the client got a 200 whose stream did not fail.
func (r *recorder) Served() bool { return r.status == http.StatusOK && r.failure == "" }

// StreamFailed records an engine failure that ended a started stream, counts it, and
// returns the OpenAI-shaped error event that tells the client.
func (r *recorder) StreamFailed(err *dispatch.Error) []byte {
	r.metrics.observeFailure(err)
	_, code, msg := answer.StatusOf(err)
	r.failureCode, r.failure = code, err.Error()
	event, _ := json.Marshal(answer.Body(http.StatusBadGateway, code, msg+" (request id "+r.reqID+")"))
	return event
}

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
	r.slo.Write(b)
	return r.ResponseWriter.Write(b)
}

// Flush sends what is buffered to the client once the body has started. A flush of the
// headers alone is skipped: the dispatcher has already read a stream's first bytes,
// which follow at once and carry the headers in the same write instead of a write of
// their own.
func (r *recorder) Flush() {
	if !r.firstByte.IsZero() {
		r.flush()
	}
}

// flush sends what the handler buffered to the client.
func (r *recorder) flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection, so streams flush at once.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// setEngineHeader names the selection's engines in X-Router-Engine, when the plan asks
// for it (debug.engine_header): "E1" for a plain engine, "prefill=P1,decode=D1" for a
// pair. A retry on another selection names the engines of the retry.
func (s *generation) setEngineHeader(h http.Header, sel bucket.Selection) {
	if !s.edge.engineHeader {
		return
	}
	picks, n := selectionPicks(sel)
	var b strings.Builder
	for i, p := range picks[:n] {
		if p.pick.Engine == nil {
			continue
		}
		if i > 0 {
			b.WriteByte(',')
		}
		if sel.Bucket.PD() {
			b.WriteString(string(p.stage) + "=")
		}
		b.WriteString(p.pick.Engine.ID())
	}
	h["X-Router-Engine"] = []string{b.String()}
}
