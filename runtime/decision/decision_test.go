package decision

import (
	"errors"
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

func TestNilTraceRecordsNothing(t *testing.T) {
	var tr *Trace
	w := engine.New(plan.Engine{ID: "A"})
	// Every method must be safe on nil: selection calls them unconditionally.
	tr.Compatible("b")
	tr.Exclude("b", "why")
	tr.BeginAttempt("b")
	tr.BeginGroup(plan.RolePlain, plan.Random, []*engine.Worker{w})
	tr.Observe(w, nil)
	tr.Admit(w, true, "", 0, 0)
	tr.PrefixLookup(Prefix{Source: "local_index", Outcome: PrefixMiss})
	tr.Note("n")
	tr.EndGroup(w, "r", nil)
	tr.EndAttempt(errors.New("x"))
}

func TestTraceNestsRecordsUnderTheOpenGroup(t *testing.T) {
	tr := &Trace{}
	a, b := engine.New(plan.Engine{ID: "A"}), engine.New(plan.Engine{ID: "B"})
	b.AddInflight(2)
	tr.Observe(a, nil) // no attempt open: dropped rather than misattributed
	tr.BeginAttempt("small")
	tr.BeginGroup(plan.RolePrefill, plan.PowerOfTwo, []*engine.Worker{a, b})
	tr.Observe(b, nil)
	tr.Observe(b, nil) // the same read again: recorded once
	tr.Admit(b, false, "max_inflight_requests", 2, 2)
	tr.PrefixLookup(Prefix{Source: "remote_indexer", Outcome: PrefixUnavailable, Detail: "timeout"})
	tr.Note("first")
	tr.Note("second")
	tr.EndGroup(nil, "", errors.New("rejected"))
	tr.EndAttempt(errors.New("bucket small: rejected"))
	tr.BeginAttempt("large")
	tr.BeginGroup(plan.RolePrefill, plan.PowerOfTwo, []*engine.Worker{a})
	tr.EndGroup(a, "only candidate", nil)
	tr.EndAttempt(nil)

	if len(tr.Attempts) != 2 {
		t.Fatalf("attempts = %+v", tr.Attempts)
	}
	g := tr.Attempts[0].Groups[0]
	if len(g.Candidates) != 2 || g.Candidates[1] != (Candidate{ID: "B", Inflight: 2}) {
		t.Errorf("candidates = %+v", g.Candidates)
	}
	if len(g.Observed) != 1 || g.Observed[0].Engine != "B" || g.Observed[0].Load != nil {
		t.Errorf("observed = %+v", g.Observed)
	}
	if len(g.Admission) != 1 || g.Admission[0] != (Verdict{Engine: "B", Limit: "max_inflight_requests", Value: 2, Cap: 2}) {
		t.Errorf("admission = %+v", g.Admission)
	}
	if g.Prefix == nil || g.Prefix.Source != "remote_indexer" || g.Prefix.Outcome != PrefixUnavailable || g.Prefix.Detail != "timeout" {
		t.Errorf("prefix = %+v", g.Prefix)
	}
	if len(g.Notes) != 2 || g.Notes[0] != "first" || g.Notes[1] != "second" {
		t.Errorf("notes = %q", g.Notes)
	}
	if p := tr.Attempts[1].Groups[0]; p.Prefix != nil || p.Notes != nil {
		t.Errorf("the second group inherited records of the first: %+v", p)
	}
	if g.Error != "rejected" || g.Pick != "" || tr.Attempts[0].Error != "bucket small: rejected" {
		t.Errorf("failed attempt = %+v", tr.Attempts[0])
	}
	if ok := tr.Attempts[1]; ok.Error != "" || ok.Groups[0].Pick != "A" || ok.Groups[0].Reason != "only candidate" {
		t.Errorf("successful attempt = %+v", ok)
	}
}

func TestSummaryKeepsOnlyWhatServingCounts(t *testing.T) {
	tr := NewSummary()
	if tr.Detailed() || !(&Trace{}).Detailed() || (*Trace)(nil).Detailed() {
		t.Fatal("only a full trace is detailed")
	}
	a, b := engine.New(plan.Engine{ID: "A"}), engine.New(plan.Engine{ID: "B"})
	tr.Compatible("small")
	tr.Exclude("huge", "too small")
	tr.BeginAttempt("small")
	tr.BeginGroup(plan.RolePlain, plan.CacheAware, []*engine.Worker{a, b})
	tr.Observe(a, nil)
	tr.Admit(a, true, "", 0, 0)
	tr.Admit(b, false, "max_inflight_requests", 2, 2)
	tr.PrefixLookup(Prefix{Source: "local_index", Outcome: PrefixMiss})
	tr.Note("dropped")
	tr.EndGroup(a, "least loaded", nil)
	tr.EndAttempt(nil)

	if tr.Resolved != nil || tr.Excluded != nil {
		t.Errorf("resolution recorded: %+v %+v", tr.Resolved, tr.Excluded)
	}
	if len(tr.Attempts) != 1 || len(tr.Attempts[0].Groups) != 1 {
		t.Fatalf("attempts = %+v", tr.Attempts)
	}
	g := tr.Attempts[0].Groups[0]
	if g.Stage != plan.RolePlain || g.Policy != plan.CacheAware || g.Pick != "A" || g.Reason != "least loaded" {
		t.Errorf("group = %+v", g)
	}
	if g.Candidates != nil || g.Observed != nil || g.Prefix != nil || g.Notes != nil {
		t.Errorf("explain-only records kept: %+v", g)
	}
	if len(g.Admission) != 1 || g.Admission[0].Engine != "B" || g.Admission[0].Admitted {
		t.Errorf("admission = %+v, want only B's rejection", g.Admission)
	}
}
