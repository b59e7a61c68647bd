package policy

import (
	"context"
	"errors"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

func TestRoundRobinRotates(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B", "C")
	p := NewRoundRobin(f.table, Limits{})
	var got []string
	for range 5 {
		pick, err := p.Pick(context.Background(), f.workers, request(plan.RolePlain))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pick.Engine.ID())
	}
	if want := "[A B C A B]"; sprint(got) != want {
		t.Fatalf("rotation = %v, want %s", got, want)
	}
}

func TestRoundRobinCursorPerInstance(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B")
	p1, p2 := NewRoundRobin(f.table, Limits{}), NewRoundRobin(f.table, Limits{})
	first, _ := p1.Pick(context.Background(), f.workers, request(plan.RolePlain))
	other, _ := p2.Pick(context.Background(), f.workers, request(plan.RolePlain))
	if first.Engine != f.w("A") || other.Engine != f.w("A") {
		t.Fatalf("two instances picked %s and %s first, want A for both", first.Engine.ID(), other.Engine.ID())
	}
}

func TestRoundRobinDryRunKeepsTheCursor(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B")
	p := NewRoundRobin(f.table, Limits{})
	var got []string
	for _, pass := range []*Pass{nil, {DryRun: true}, nil} {
		pick, err := p.Pick(context.Background(), f.workers, in(pass, request(plan.RolePlain)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pick.Engine.ID())
	}
	// The dry run shows the engine the next served request gets, and leaves it to it.
	if want := "[A B B]"; sprint(got) != want {
		t.Fatalf("serve, dry run, serve = %v, want %s", got, want)
	}
}

func TestRoundRobinSkipsRejected(t *testing.T) {
	f := newFleet(t, plan.RolePlain, "A", "B", "C")
	f.inflight("A", 1)
	p := NewRoundRobin(f.table, Limits{MaxInflightRequests: 1})
	pass, group := traced()
	pick, err := p.Pick(context.Background(), f.workers, in(pass, request(plan.RolePlain)))
	if err != nil || pick.Engine != f.w("B") {
		t.Fatalf("Pick = %+v, %v; want B after A is rejected", pick, err)
	}
	if v := group().Admission; len(v) != 2 || v[0].Admitted || !v[1].Admitted {
		t.Errorf("verdicts = %+v, want A rejected then B admitted", v)
	}
}

func TestRoundRobinNoAdmissibleEngine(t *testing.T) {
	f := newFleet(t, plan.RoleDecode, "A", "B")
	f.inflight("A", 1)
	f.inflight("B", 1)
	_, err := NewRoundRobin(f.table, Limits{MaxInflightRequests: 1}).Pick(context.Background(), f.workers, request(plan.RoleDecode))
	var na *NoAdmissibleEngine
	if !errors.As(err, &na) || len(na.Rejections) != 2 || na.Stage != plan.RoleDecode {
		t.Fatalf("err = %v, want NoAdmissibleEngine with two rejections", err)
	}
}

func TestRoundRobinNoCandidates(t *testing.T) {
	_, err := NewRoundRobin(nil, Limits{}).Pick(context.Background(), nil, request(plan.RolePlain))
	var nc *NoCandidates
	if !errors.As(err, &nc) {
		t.Fatalf("err = %v, want NoCandidates", err)
	}
}
