package server

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
)

// record is one request's routing outcome as the request path records it: the decision
// /admin/state lists (control.Decision) and the selection's picks. Engines and Reasons
// are built from the picks only when /admin/state lists the decision, so a request does
// not pay for two maps nobody may read.
type record struct {
	control.Decision
	picked  [2]stagePick
	npicked int
}

// stagePick is the engine a complete selection picked for one stage, why, by which
// policy, and the cached prefix it holds when that was why (see policy.Pick).
type stagePick struct {
	stage, engine, reason, policy string
	prefixTokens                  int64
}

func (d *record) picks() []stagePick { return d.picked[:d.npicked] }

func (d *record) fromSelection(t *decision.Trace, sel bucket.Selection, err error) {
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
			d.picked[d.npicked] = stagePick{stage: string(sp.stage), engine: sp.pick.Engine.ID(), reason: sp.pick.Reason,
				policy: policyOf(t, sp.stage), prefixTokens: sp.pick.PrefixTokens}
			d.npicked++
		}
	}
}

// expand fills Engines and Reasons from the picks, for a decision about to be listed.
func (d *record) expand() {
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

// recent is a ring of the last decisions.
type recent struct {
	mu   sync.Mutex
	buf  []record
	next int
	full bool
}

func newRecent(n int) *recent { return &recent{buf: make([]record, n)} }

func (r *recent) add(d *record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = *d
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

// list returns the decisions newest first, with their engines and reasons.
func (r *recent) list() []control.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := make([]control.Decision, 0, n)
	for i := 1; i <= n; i++ {
		d := r.buf[(r.next-i+len(r.buf))%len(r.buf)]
		d.expand()
		out = append(out, d.Decision)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	return out
}

// finish records a finished request: metrics, the recent-decisions ring and one log line.
func (s *generation) finish(rec *recorder, d *record) {
	status := rec.status
	if status == 0 {
		status = answer.StatusClientClosed
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
	if rec.Served() {
		rec.slo.Done()
	}
	endSpan(rec.span, d)
	s.recent.add(d)
	s.logRequest(d, rec.idReplaced)
}

// logRequest writes the request's log line. The attributes are typed and the engines
// are a group (engines.plain=E1, or "engines":{"plain":"E1"} in JSON) rather than a map,
// which a handler would format by reflection on every request. The record goes to the
// handler directly: slog.Logger would also capture the caller's stack for a source
// location the router never logs.
//
// Every line carries the request id, so a client's report can be found by grepping it;
// replaced says the client's id was refused (never written: it may be hostile).
func (s *generation) logRequest(d *record, replaced bool) {
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
	// The attributes go to the record in one call: a record keeps five inline and puts
	// the rest in one slice, allocated once for all of them.
	attrs := [10]slog.Attr{slog.String("model", d.Model), slog.String("bucket", d.Bucket),
		{Key: "engines", Value: slog.GroupValue(engines[:n]...)},
		slog.Int("status", d.Status), slog.Float64("duration_ms", d.DurationMS),
		slog.Int64("input_tokens", d.InputTokens)}
	na := 6
	add := func(a slog.Attr) { attrs[na] = a; na++ }
	if d.Error != "" {
		add(slog.String("error", d.Error))
	}
	add(slog.String("request_id", d.RequestID))
	if d.TraceID != "" {
		add(slog.String("trace_id", d.TraceID))
	}
	if replaced {
		add(slog.Bool("request_id_replaced", true))
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(attrs[:na]...)
	_ = h.Handle(ctx, r)
}

// policyOf is the policy the last bucket attempt of t used for stage.
func policyOf(t *decision.Trace, stage plan.Role) string {
	if len(t.Attempts) == 0 {
		return ""
	}
	for _, g := range t.Attempts[len(t.Attempts)-1].Groups {
		if g.Stage == stage {
			return string(g.Policy)
		}
	}
	return ""
}
