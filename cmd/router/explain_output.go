package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/state/load"
)

// explanation is what `router explain` prints: the decision trace of one selection pass,
// with each candidate's load as the fixture set it, and the outcome. Its JSON form is the
// command's --json output.
type explanation struct {
	Model        string               `json:"model"`
	InputTokens  int64                `json:"input_tokens"`
	ExpectedPeak *int64               `json:"expected_peak"`
	Resolved     []string             `json:"resolved"`
	Excluded     []decision.Exclusion `json:"excluded"`
	Attempts     []attemptView        `json:"attempts"`
	Bucket       *string              `json:"bucket"`
	Picks        map[plan.Role]string `json:"picks"`
	Error        *errorView           `json:"error"`
}

type attemptView struct {
	Bucket string      `json:"bucket"`
	Groups []groupView `json:"groups"`
	Error  string      `json:"error,omitempty"`
}

type groupView struct {
	Stage      plan.Role          `json:"stage"`
	Policy     plan.PolicyType    `json:"policy"`
	Candidates []candidateView    `json:"candidates"`
	ReadLoad   []string           `json:"read_load"`
	Admission  []decision.Verdict `json:"admission"`
	Pick       string             `json:"pick,omitempty"`
	Reason     string             `json:"reason,omitempty"`
	Error      string             `json:"error,omitempty"`
}

type candidateView struct {
	ID       string    `json:"id"`
	Inflight int64     `json:"inflight"`
	Load     *loadView `json:"load"` // null: unknown (missing, stale or rank-incomplete)
}

// loadView is a report as explain shows it. The native-only fields are absent for a basic
// report, whose publisher does not supply them.
type loadView struct {
	Native                bool   `json:"native"`
	Running               int64  `json:"running"`
	Waiting               int64  `json:"waiting"`
	WaitingUncachedTokens *int64 `json:"waiting_uncached_tokens,omitempty"`
	UsedKVTokens          *int64 `json:"used_kv_tokens,omitempty"`
	MaxKVTokens           *int64 `json:"max_kv_tokens,omitempty"`
	MaxRunning            *int64 `json:"max_running,omitempty"`
	AgeMS                 int64  `json:"age_ms"`
}

type errorView struct {
	Code    string   `json:"code"`
	Status  int      `json:"status"`
	Message string   `json:"message"`
	Reasons []string `json:"reasons,omitempty"`
}

func newExplanation(facts *policy.Facts, tr *decision.Trace, sel bucket.Selection, err error,
	reg *engine.Registry, table *load.Table, now time.Time) *explanation {
	x := &explanation{
		Model:       facts.Model,
		InputTokens: facts.InputTokens,
		Resolved:    append([]string{}, tr.Resolved...),
		Excluded:    append([]decision.Exclusion{}, tr.Excluded...),
		Attempts:    []attemptView{},
		Picks:       map[plan.Role]string{},
	}
	if facts.PeakKnown {
		x.ExpectedPeak = &facts.ExpectedPeak
	}
	for _, a := range tr.Attempts {
		av := attemptView{Bucket: a.Bucket, Groups: []groupView{}, Error: a.Error}
		for _, g := range a.Groups {
			gv := groupView{Stage: g.Stage, Policy: g.Policy, Candidates: []candidateView{}, ReadLoad: []string{},
				Admission: append([]decision.Verdict{}, g.Admission...), Pick: g.Pick, Reason: g.Reason, Error: g.Error}
			for _, c := range g.Candidates {
				gv.Candidates = append(gv.Candidates, candidateView{ID: c.ID, Inflight: c.Inflight,
					Load: viewLoad(table.Load(reg.Get(c.ID), now), now)})
			}
			for _, o := range g.Observed {
				gv.ReadLoad = append(gv.ReadLoad, o.Engine)
			}
			av.Groups = append(av.Groups, gv)
		}
		x.Attempts = append(x.Attempts, av)
	}
	var routeErr *bucket.Error
	switch {
	case errors.As(err, &routeErr):
		x.Error = &errorView{Code: routeErr.Code(), Status: routeErr.Status(), Message: routeErr.Error(), Reasons: routeErr.Reasons}
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

func viewLoad(r *load.Report, now time.Time) *loadView {
	if r == nil {
		return nil
	}
	v := &loadView{Native: r.Native, Running: r.Running, Waiting: r.Waiting, AgeMS: now.Sub(r.At).Milliseconds()}
	if r.Native {
		v.WaitingUncachedTokens, v.UsedKVTokens, v.MaxKVTokens, v.MaxRunning = &r.WaitingUncachedTokens, &r.UsedKVTokens, &r.MaxKVTokens, &r.MaxRunning
	}
	return v
}

func (x *explanation) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(x)
}

func (x *explanation) writeText(w io.Writer) {
	peak := "output budget unknown"
	if x.ExpectedPeak != nil {
		peak = fmt.Sprintf("expected peak %d tokens", *x.ExpectedPeak)
	}
	fmt.Fprintf(w, "request: model %s, input %d tokens, %s\n", x.Model, x.InputTokens, peak)
	if len(x.Resolved) > 0 {
		fmt.Fprintf(w, "compatible buckets, in try order: %s\n", strings.Join(x.Resolved, ", "))
	}
	for _, e := range x.Excluded {
		fmt.Fprintf(w, "excluded bucket %s: %s\n", e.Bucket, e.Reason)
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

func (g *groupView) writeText(w io.Writer) {
	if len(g.Candidates) == 0 {
		fmt.Fprintf(w, "  %s group (%s): no candidates\n", g.Stage, g.Policy)
	} else {
		fmt.Fprintf(w, "  %s group (%s), candidates:\n", g.Stage, g.Policy)
	}
	for _, c := range g.Candidates {
		fmt.Fprintf(w, "    %s: in-flight %d, %s\n", c.ID, c.Inflight, c.Load.text())
	}
	if len(g.ReadLoad) > 0 {
		fmt.Fprintf(w, "    policy read load of: %s\n", strings.Join(g.ReadLoad, ", "))
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

func (l *loadView) text() string {
	if l == nil {
		return "load unknown"
	}
	s := fmt.Sprintf("basic report: running %d, waiting %d", l.Running, l.Waiting)
	if l.Native {
		s = fmt.Sprintf("native report: running %d, waiting %d, waiting uncached tokens %d, kv tokens %d/%d, max running %d",
			l.Running, l.Waiting, *l.WaitingUncachedTokens, *l.UsedKVTokens, *l.MaxKVTokens, *l.MaxRunning)
	}
	return fmt.Sprintf("%s, age %dms", s, l.AgeMS)
}
