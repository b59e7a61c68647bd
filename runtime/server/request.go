package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
)

// finish records a finished request: metrics, the recent-decisions ring and one log line.
func (s *Server) finish(rec *recorder, d *Decision) {
	status := rec.status
	if status == 0 {
		status = statusClientClosed
	}
	elapsed := time.Since(rec.start)
	d.Status, d.DurationMS = status, float64(elapsed.Microseconds())/1000
	switch {
	case rec.failure != "":
		d.Error = rec.failure
	case d.Error == "" && rec.errCode != "":
		d.Error = rec.errCode
	}
	// A client chooses the model name and much of an error's text: the decision ring and
	// the log keep a bounded prefix of each.
	d.Model, d.Error = logline.Clip(d.Model, logline.MaxModelText), logline.Clip(d.Error, logline.MaxErrorText)
	s.metrics.observeRequest(d, rec, elapsed)
	s.recent.add(d)
	s.logRequest(d)
}

// logRequest writes the request's log line. The attributes are typed and the engines
// are a group (engines.plain=E1, or "engines":{"plain":"E1"} in JSON) rather than a map,
// which a handler would format by reflection on every request. The record goes to the
// handler directly: slog.Logger would also capture the caller's stack for a source
// location the router never logs.
func (s *Server) logRequest(d *Decision) {
	ctx := context.Background()
	h := s.reqLog
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	var engines [len(d.picked)]slog.Attr
	n := 0
	for _, p := range d.picks() {
		engines[n] = slog.String(p.stage, p.engine)
		n++
	}
	if n == 2 && engines[0].Key > engines[1].Key { // stages by name, as a map's keys were
		engines[0], engines[1] = engines[1], engines[0]
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("model", d.Model), slog.String("bucket", d.Bucket),
		slog.Attr{Key: "engines", Value: slog.GroupValue(engines[:n]...)},
		slog.Int("status", d.Status), slog.Float64("duration_ms", d.DurationMS),
		slog.Int64("input_tokens", d.InputTokens))
	if d.Error != "" {
		r.AddAttrs(slog.String("error", d.Error))
	}
	_ = h.Handle(ctx, r)
}

// statusClientClosed is logged when the client went away before any response (nginx's
// convention); it is never written to a client.
const statusClientClosed = 499

// recorder remembers what was written to the client: the final status, when the first
// body byte went out (time to first token for streams), an error code, and a failure that
// ended a stream after its 200.
type recorder struct {
	http.ResponseWriter
	metrics     *metrics
	reqID       string
	start       time.Time
	status      int
	firstByte   time.Time
	errCode     string
	failureCode string
	failure     string
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
	_, code, msg := statusOf(err)
	r.failureCode, r.failure = code, err.Error()
	event, _ := json.Marshal(errorBody(http.StatusBadGateway, code, msg+" (request id "+r.reqID+")"))
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
	return r.ResponseWriter.Write(b)
}

// Flush sends what is buffered to the client once the body has started. A flush of the
// headers alone, which ReverseProxy asks for from a timer at the start of every stream,
// is skipped: modifyResponse has already read the stream's first bytes, which follow at
// once and carry the headers in the same write instead of a write of their own.
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

	// picked holds the selection's picks. Engines and Reasons are built from it only when
	// /admin/state lists the decision, so a request does not pay for two maps nobody may
	// read.
	picked  [2]stagePick
	npicked int
}

// stagePick is the engine a complete selection picked for one stage, and why.
type stagePick struct {
	stage, engine, reason string
}

func (d *Decision) picks() []stagePick { return d.picked[:d.npicked] }

func (d *Decision) fromSelection(t *decision.Trace, sel bucket.Selection, err error) {
	// Route passes a request on only after a failed attempt, so every attempt but the
	// last was a fall-through.
	d.Fallthroughs = max(len(t.Attempts)-1, 0)
	d.npicked = 0
	if err != nil {
		d.Error = err.Error()
		return
	}
	d.Bucket = sel.Bucket.ID()
	picks, n := selectionPicks(sel)
	for _, sp := range picks[:n] {
		if sp.pick.Engine != nil {
			d.picked[d.npicked] = stagePick{stage: string(sp.stage), engine: sp.pick.Engine.ID(), reason: sp.pick.Reason}
			d.npicked++
		}
	}
}

// expand fills Engines and Reasons from the picks, for a decision about to be listed.
func (d *Decision) expand() {
	if d.npicked == 0 {
		return
	}
	d.Engines, d.Reasons = make(map[string]string, d.npicked), make(map[string]string, d.npicked)
	for _, p := range d.picks() {
		d.Engines[p.stage], d.Reasons[p.stage] = p.engine, p.reason
	}
}

// stageSelection is a complete selection's pick for one stage.
type stageSelection struct {
	stage plan.Role
	pick  policy.Pick
}

// selectionPicks returns a complete selection's picks by stage and their number, in an
// array so that nothing is allocated: the plain pick, or the prefill and decode picks;
// none for an incomplete selection.
func selectionPicks(sel bucket.Selection) (out [2]stageSelection, n int) {
	switch {
	case sel.Bucket == nil:
		return out, 0
	case sel.Bucket.PD():
		out[0], out[1] = stageSelection{plan.RolePrefill, sel.Prefill}, stageSelection{plan.RoleDecode, sel.Decode}
		return out, 2
	default:
		out[0] = stageSelection{plan.RolePlain, sel.Plain}
		return out, 1
	}
}

func statusLabel(status int) string { return strconv.Itoa(status) }
