// Package explain renders one selection pass for people and scripts: the ordered
// compatible buckets and why the others were excluded, each attempt with its groups'
// candidates and their load, the policies' picks and reasons, admission verdicts, and the
// selection or the HTTP error serving would return. `router explain` builds it offline
// from a load fixture and `router serve` from live state for POST /admin/explain, so both
// print the same thing.
package explain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/queue"
	"github.com/routerkit/router/runtime/slo"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/token"
)

// Explanation is the decision trace of one selection pass, with each candidate's load at
// the time, and the outcome. Its JSON form is `router explain --json` and the body of
// POST /admin/explain.
type Explanation struct {
	Model       string `json:"model"`
	InputTokens int64  `json:"input_tokens"`
	// Tokens is set when the request was given as text and tokenized by the router.
	Tokens       *Tokens `json:"tokens,omitempty"`
	ExpectedPeak *int64  `json:"expected_peak"`
	// Targets are the request's SLO targets; nil when it has none.
	Targets *slo.Targets `json:"slo_targets,omitempty"`
	// SLO is each compatible bucket's place in SLO ordering, in try order; empty when the
	// targets did not order the buckets (none given, or their preferences disabled).
	SLO      []decision.SLORank   `json:"slo,omitempty"`
	Resolved []string             `json:"resolved"`
	Excluded []decision.Exclusion `json:"excluded"`
	Attempts []Attempt            `json:"attempts"`
	Bucket   *string              `json:"bucket"`
	Picks    map[plan.Role]string `json:"picks"`
	Error    *Error               `json:"error"`
	// Breakers lists engines of the model whose circuit breaker is open or half-open.
	Breakers []Breaker `json:"breakers,omitempty"`
	// Queue is what the router's queue would do with the request (docs/serve.md,
	// "Queueing and rate limits"); set by a serving router.
	Queue *queue.Preview `json:"queue,omitempty"`
}

// Attempt is one bucket's try at a complete selection.
type Attempt struct {
	Bucket string  `json:"bucket"`
	Groups []Group `json:"groups"`
	Error  string  `json:"error,omitempty"`
}

// Group is one engine group's pick within an attempt.
type Group struct {
	Stage      plan.Role       `json:"stage"`
	Policy     plan.PolicyType `json:"policy"`
	Candidates []Candidate     `json:"candidates"`
	// Left are the model's engines of the group's role that are not candidates, and why,
	// so that an engine missing from the candidates is never a mystery.
	Left      []LeftOut          `json:"left_out,omitempty"`
	ReadLoad  []string           `json:"read_load"`
	Admission []decision.Verdict `json:"admission"`
	Prefix    *decision.Prefix   `json:"prefix,omitempty"`
	Notes     []string           `json:"notes,omitempty"`
	Pick      string             `json:"pick,omitempty"`
	Reason    string             `json:"reason,omitempty"`
	Error     string             `json:"error,omitempty"`
}

// Candidate is a healthy group member and its load when the pass ran.
type Candidate struct {
	ID       string `json:"id"`
	Inflight int64  `json:"inflight"`
	Load     *Load  `json:"load"` // null: unknown (missing, stale or rank-incomplete)
}

// LeftOut is an engine of the group's role that was not a candidate, with the reason.
type LeftOut struct {
	Engine string `json:"engine"`
	Reason string `json:"reason"`
}

// leftOut lists the model's engines of role that are not among candidates: down (failing
// health checks), behind an open breaker, unable to receive the KV cache of peer (the
// attempt's prefill pick, for a decode group), or, when none of those, not a member of the
// group (its worker_ids name others).
func leftOut(reg *engine.Registry, model string, role plan.Role, candidates []Candidate, peer *engine.Worker) []LeftOut {
	in := map[string]bool{}
	for _, c := range candidates {
		in[c.ID] = true
	}
	var out []LeftOut
	for _, w := range reg.Snapshot().Workers(model, role) {
		if in[w.ID()] {
			continue
		}
		reason := "not in this group's worker_ids"
		switch b := w.Breaker(); {
		case !w.Healthy():
			reason = "down: failing health checks"
		case b != nil && b.State() == engine.BreakerOpen:
			reason = "circuit breaker open"
		case b != nil && b.State() != engine.BreakerClosed:
			reason = "circuit breaker " + b.State().String() + ", its probe already sent"
		case peer != nil && plan.PDMismatch(peer.PDCompat(), w.PDCompat()) != "":
			reason = "cannot receive the KV cache of prefill " + peer.ID() + ": " + plan.PDMismatch(peer.PDCompat(), w.PDCompat())
		}
		out = append(out, LeftOut{Engine: w.ID(), Reason: reason})
	}
	return out
}

// Load is a report as explain shows it. The native-only fields are absent for a basic
// report, whose publisher does not supply them.
type Load struct {
	Native                bool   `json:"native"`
	Running               int64  `json:"running"`
	Waiting               int64  `json:"waiting"`
	WaitingUncachedTokens *int64 `json:"waiting_uncached_tokens,omitempty"`
	UsedKVTokens          *int64 `json:"used_kv_tokens,omitempty"`
	TotalKVTokens         *int64 `json:"total_kv_tokens,omitempty"`
	MaxKVTokens           *int64 `json:"max_kv_tokens,omitempty"`
	MaxRunning            *int64 `json:"max_running,omitempty"`
	AgeMS                 int64  `json:"age_ms"`
}

// Error is a failed pass as serving would answer it.
type Error struct {
	Code    string   `json:"code"`
	Status  int      `json:"status"`
	Message string   `json:"message"`
	Reasons []string `json:"reasons,omitempty"`
}

// New builds the explanation of a pass that ran with tr in its context and returned sel
// and err. Candidate loads are read from table at now.
func New(facts *policy.Facts, tr *decision.Trace, sel bucket.Selection, err error,
	reg *engine.Registry, table *load.Table, now time.Time) *Explanation {
	x := &Explanation{
		Model:       facts.Model,
		InputTokens: facts.InputTokens,
		Resolved:    append([]string{}, tr.Resolved...),
		Excluded:    append([]decision.Exclusion{}, tr.Excluded...),
		Attempts:    []Attempt{},
		Picks:       map[plan.Role]string{},
		Breakers:    breakers(reg, facts.Model),
	}
	if facts.PeakKnown {
		x.ExpectedPeak = &facts.ExpectedPeak
	}
	if facts.SLO.Any() {
		t := facts.SLO
		x.Targets = &t
		x.SLO = tr.SLO
	}
	for _, a := range tr.Attempts {
		av := Attempt{Bucket: a.Bucket, Groups: []Group{}, Error: a.Error}
		var prefill *engine.Worker // the attempt's prefill pick, which its decode group pairs with
		for _, g := range a.Groups {
			gv := Group{Stage: g.Stage, Policy: g.Policy, Candidates: []Candidate{}, ReadLoad: []string{},
				Admission: append([]decision.Verdict{}, g.Admission...), Prefix: g.Prefix, Notes: g.Notes,
				Pick: g.Pick, Reason: g.Reason, Error: g.Error}
			// A candidate's load is what its policy read, when it read it; otherwise the
			// table's report at now (the engine may have left the registry since).
			observed := map[string]*load.Report{}
			for _, o := range g.Observed {
				gv.ReadLoad = append(gv.ReadLoad, o.Engine)
				observed[o.Engine] = o.Load
			}
			for _, c := range g.Candidates {
				r, ok := observed[c.ID]
				if w := reg.Get(c.ID); !ok && w != nil {
					r = table.Load(w, now)
				}
				gv.Candidates = append(gv.Candidates, Candidate{ID: c.ID, Inflight: c.Inflight, Load: viewLoad(r, now)})
			}
			var peer *engine.Worker
			if g.Stage == plan.RoleDecode {
				peer = prefill
			}
			gv.Left = leftOut(reg, facts.Model, g.Stage, gv.Candidates, peer)
			if g.Stage == plan.RolePrefill && g.Pick != "" {
				prefill = reg.Get(g.Pick)
			}
			av.Groups = append(av.Groups, gv)
		}
		x.Attempts = append(x.Attempts, av)
	}
	var routeErr *bucket.Error
	switch {
	case errors.As(err, &routeErr):
		status, code, msg := answer.StatusOf(routeErr)
		x.Error = &Error{Code: code, Status: status, Message: msg, Reasons: routeErr.Reasons}
	case err == nil:
		id := sel.Bucket.ID()
		x.Bucket = &id
		for stage, p := range map[plan.Role]policy.Pick{plan.RolePlain: sel.Plain, plan.RolePrefill: sel.Prefill, plan.RoleDecode: sel.Decode} {
			if p.Engine != nil {
				x.Picks[stage] = p.Engine.ID()
			}
		}
	}
	return x
}

func viewLoad(r *load.Report, now time.Time) *Load {
	if r == nil {
		return nil
	}
	v := &Load{Native: r.Native, Running: r.Running, Waiting: r.Waiting, AgeMS: now.Sub(r.At).Milliseconds()}
	if r.Native {
		v.WaitingUncachedTokens, v.UsedKVTokens, v.TotalKVTokens, v.MaxKVTokens, v.MaxRunning =
			&r.WaitingUncachedTokens, &r.UsedKVTokens, &r.TotalKVTokens, &r.MaxKVTokens, &r.MaxRunning
	}
	return v
}

// WriteJSON writes the explanation as indented JSON.
func (x *Explanation) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(x)
}

// WriteText writes the explanation for a person, a line per step.
func (x *Explanation) WriteText(w io.Writer) {
	peak := "output budget unknown"
	if x.ExpectedPeak != nil {
		peak = fmt.Sprintf("expected peak %d tokens", *x.ExpectedPeak)
	}
	fmt.Fprintf(w, "request: model %s, input %d tokens, %s\n", x.Model, x.InputTokens, peak)
	if x.Tokens != nil {
		x.Tokens.writeText(w)
	}
	x.writeSLO(w)
	if len(x.Resolved) > 0 {
		fmt.Fprintf(w, "compatible buckets, in try order: %s\n", strings.Join(x.Resolved, ", "))
	}
	for _, e := range x.Excluded {
		fmt.Fprintf(w, "excluded bucket %s: %s\n", e.Bucket, e.Reason)
	}
	writeBreakers(w, x.Breakers)
	if x.Queue != nil {
		fmt.Fprintf(w, "queue: %s\n", x.Queue)
	}
	for i, a := range x.Attempts {
		fmt.Fprintf(w, "attempt %d: bucket %s\n", i+1, a.Bucket)
		for _, g := range a.Groups {
			g.writeText(w)
		}
		if a.Error != "" {
			fmt.Fprintf(w, "  attempt failed: %s\n", a.Error)
		}
	}
	if x.Error != nil {
		fmt.Fprintf(w, "error: %d %s: %s\n", x.Error.Status, x.Error.Code, x.Error.Message)
		return
	}
	var picks []string
	for _, stage := range []plan.Role{plan.RolePlain, plan.RolePrefill, plan.RoleDecode} {
		if id, ok := x.Picks[stage]; ok {
			picks = append(picks, fmt.Sprintf("%s %s", stage, id))
		}
	}
	fmt.Fprintf(w, "selected: bucket %s: %s\n", *x.Bucket, strings.Join(picks, ", "))
}

func (g *Group) writeText(w io.Writer) {
	if len(g.Candidates) == 0 {
		fmt.Fprintf(w, "  %s group (%s): no candidates\n", g.Stage, g.Policy)
	} else {
		fmt.Fprintf(w, "  %s group (%s), candidates:\n", g.Stage, g.Policy)
	}
	for _, c := range g.Candidates {
		fmt.Fprintf(w, "    %s: in-flight %d, %s\n", c.ID, c.Inflight, c.Load.text())
	}
	for _, l := range g.Left {
		fmt.Fprintf(w, "    not a candidate: %s, %s\n", l.Engine, l.Reason)
	}
	if len(g.ReadLoad) > 0 {
		fmt.Fprintf(w, "    policy read load of: %s\n", strings.Join(g.ReadLoad, ", "))
	}
	if p := g.Prefix; p != nil {
		fmt.Fprintf(w, "    prefix lookup (%s): %s", p.Source, p.Outcome)
		if p.Detail != "" {
			fmt.Fprintf(w, " (%s)", p.Detail)
		}
		for i, m := range p.Matches {
			sep := ", "
			if i == 0 {
				sep = "; candidates holding a prefix: "
			}
			fmt.Fprintf(w, "%s%s %d tokens", sep, m.Engine, m.Tokens)
		}
		fmt.Fprintln(w)
	}
	for _, n := range g.Notes {
		fmt.Fprintf(w, "    note: %s\n", n)
	}
	for _, v := range g.Admission {
		if v.Admitted {
			fmt.Fprintf(w, "    admission: %s admitted\n", v.Engine)
		} else {
			fmt.Fprintf(w, "    admission: %s rejected, %s: %d, cap %d\n", v.Engine, v.Limit, v.Value, v.Cap)
		}
	}
	if g.Error != "" {
		fmt.Fprintf(w, "    error: %s\n", g.Error)
	} else {
		fmt.Fprintf(w, "    pick: %s (%s)\n", g.Pick, g.Reason)
	}
}

func (l *Load) text() string {
	if l == nil {
		return "load unknown"
	}
	s := fmt.Sprintf("basic report: running %d, waiting %d", l.Running, l.Waiting)
	if l.Native {
		s = fmt.Sprintf("native report: running %d, waiting %d, waiting uncached tokens %s, kv tokens %s/%s (%s with pending prefill), max running %s",
			l.Running, l.Waiting, orUnknown(l.WaitingUncachedTokens), orUnknown(l.UsedKVTokens), orUnknown(l.MaxKVTokens), orUnknown(l.TotalKVTokens), orUnknown(l.MaxRunning))
	}
	return fmt.Sprintf("%s, age %dms", s, l.AgeMS)
}

// orUnknown prints a native field, or "unknown" when the report did not give it (a load
// fixture that leaves it out): a zero the engine never reported would read as a fact.
func orUnknown(v *int64) string {
	if v == nil {
		return "unknown"
	}
	return fmt.Sprint(*v)
}

// Request asks a running router to explain a request given by its routing facts rather
// than a chat body: the body of POST /admin/explain that `router explain --router` sends.
// A body with input_tokens is read as a Request; any other body as a chat request.
type Request struct {
	// Model may be empty when the router serves one model.
	Model       string `json:"model,omitempty"`
	InputTokens int64  `json:"input_tokens"`
	MaxTokens   *int64 `json:"max_tokens,omitempty"`
	SessionID   string `json:"session_id,omitempty"`
	RoutingKey  string `json:"routing_key,omitempty"`
	// Text, when set instead of InputTokens, is a prompt the router tokenizes with the
	// model's tokenizer, as it would a completion prompt.
	Text *string `json:"text,omitempty"`
	// TTFTSLOMS and TPSSLO are the request's SLO targets, as the x-sgl-ttft-slo-ms and
	// x-sgl-tps-slo headers give them; omitted is no target.
	TTFTSLOMS float64 `json:"ttft_slo_ms,omitempty"`
	TPSSLO    float64 `json:"tps_slo,omitempty"`
	// Messages, when set instead of InputTokens, is a conversation the router renders
	// with the model's chat template and tokenizes, as it would a chat request; Tools and
	// ChatTemplateKwargs go to the template with it.
	Messages           json.RawMessage `json:"messages,omitempty"`
	Tools              json.RawMessage `json:"tools,omitempty"`
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs,omitempty"`
}

// ErrTwoPrompts is a Request that gives its prompt more than one way.
var ErrTwoPrompts = errors.New("give the prompt one way: input_tokens, text or messages")

// Facts are the routing facts of the request for model, its text or messages tokenized
// with tok under meter (tokenized reports that they were); both explain paths, offline
// and POST /admin/explain, read a request through it. A budget whose peak overflows is
// returned apart (peakErr): it is explained like any other selection failure.
func (r *Request) Facts(meter *token.Meter, model string, tok token.Tokenizer) (facts policy.Facts, tokenized bool, peakErr, err error) {
	facts = policy.Facts{Model: model, InputTokens: r.InputTokens, SessionKey: r.SessionID, RoutingKey: r.RoutingKey,
		SLO: slo.Targets{TTFTMS: r.TTFTSLOMS, TPS: r.TPSSLO}}
	if err := r.checkTargets(); err != nil {
		return policy.Facts{}, false, nil, err
	}
	ids, tokenized, err := r.TokenIDs(meter, tok)
	if err != nil {
		return policy.Facts{}, false, nil, err
	}
	if tokenized {
		facts.InputTokens, facts.TokenIDs = int64(len(ids)), ids
	}
	if r.MaxTokens != nil {
		facts.ExpectedPeak, peakErr = bucket.ExpectedPeak(facts.InputTokens, *r.MaxTokens)
		facts.PeakKnown = peakErr == nil
	}
	return facts, tokenized, peakErr, nil
}

// TokenIDs returns the ids of the request's text or messages computed by tok under
// meter, or nil and false when the request gives its length as input_tokens. A meter's
// error (*token.TooLargeError, the context's) is returned as it is.
func (r *Request) TokenIDs(meter *token.Meter, tok token.Tokenizer) ([]uint32, bool, error) {
	hasText, hasMessages := r.Text != nil, len(r.Messages) > 0 && string(r.Messages) != "null"
	switch {
	case hasText && hasMessages, (hasText || hasMessages) && r.InputTokens != 0:
		return nil, false, ErrTwoPrompts
	case hasText:
		ids, err := tok.Encode(meter, *r.Text, true)
		return ids, err == nil, err
	case hasMessages:
		if err := token.CheckMessages(r.Messages); err != nil {
			return nil, false, err
		}
		ids, err := tok.EncodeChat(meter, token.Chat{Messages: r.Messages, Tools: r.Tools, Kwargs: r.ChatTemplateKwargs})
		switch {
		case token.Stopped(err):
			return nil, false, err
		case err != nil:
			return nil, false, fmt.Errorf("rendering the chat template: %w", err)
		}
		return ids, true, nil
	}
	return nil, false, nil
}
