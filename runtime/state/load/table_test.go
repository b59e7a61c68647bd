package load

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func setup(dp int) (*Table, *engine.Worker, *clock) {
	e := plan.Engine{ID: "E", Model: "m", Role: plan.RoleDecode, DPSize: dp, Load: plan.LoadSource{StaleAfterMS: 1000}}
	c := &clock{now: t0}
	return NewTable([]plan.Engine{e}, c.Now), engine.New(e), c
}

func TestLoadFreshness(t *testing.T) {
	tests := []struct {
		name    string
		dp      int
		ranks   map[int]Sample // rank -> sample
		age     time.Duration  // clock advance after the updates
		wantNil bool
		want    Sample
	}{
		{name: "missing report is unknown", dp: 1, wantNil: true},
		{name: "fresh report", dp: 1, ranks: map[int]Sample{0: {At: t0, Running: 3, Waiting: 2}},
			want: Sample{At: t0, Running: 3, Waiting: 2}},
		{name: "exactly at the window is fresh", dp: 1, ranks: map[int]Sample{0: {At: t0, Running: 1}}, age: time.Second,
			want: Sample{At: t0, Running: 1}},
		{name: "past the window is unknown", dp: 1, ranks: map[int]Sample{0: {At: t0, Running: 1}}, age: time.Second + time.Millisecond, wantNil: true},
		{name: "rank-incomplete is unknown, not partial", dp: 2, ranks: map[int]Sample{0: {At: t0, Running: 5}}, wantNil: true},
		{name: "ranks are summed", dp: 2, ranks: map[int]Sample{
			0: {At: t0, Running: 1, Waiting: 2, Native: true, WaitingUncachedTokens: 10, UsedKVTokens: 100, MaxKVTokens: 1000, MaxRunning: 8},
			1: {At: t0.Add(-time.Millisecond), Running: 3, Waiting: 4, Native: true, WaitingUncachedTokens: 20, UsedKVTokens: 300, MaxKVTokens: 1000, MaxRunning: 8}},
			want: Sample{At: t0.Add(-time.Millisecond), Running: 4, Waiting: 6, Native: true, WaitingUncachedTokens: 30, UsedKVTokens: 400, MaxKVTokens: 2000, MaxRunning: 16}},
		{name: "one stale rank makes the engine unknown", dp: 2, ranks: map[int]Sample{
			0: {At: t0.Add(500 * time.Millisecond), Running: 1},
			1: {At: t0.Add(-600 * time.Millisecond), Running: 1}},
			age: 500 * time.Millisecond, wantNil: true},
		{name: "one basic rank makes the aggregate basic", dp: 2, ranks: map[int]Sample{
			0: {At: t0, Native: true, MaxKVTokens: 10, QueueMS: 5, HasQueueMS: true},
			1: {At: t0, Native: false}},
			want: Sample{At: t0, Native: false, MaxKVTokens: 10}},
		{name: "queue estimate is the slowest rank's when all have one", dp: 2, ranks: map[int]Sample{
			0: {At: t0, Native: true, QueueMS: 5, HasQueueMS: true},
			1: {At: t0, Native: true, QueueMS: 9, HasQueueMS: true}},
			want: Sample{At: t0, Native: true, QueueMS: 9, HasQueueMS: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, w, c := setup(tt.dp)
			for rank, s := range tt.ranks {
				if err := tab.Update("E", rank, s); err != nil {
					t.Fatal(err)
				}
			}
			c.now = c.now.Add(tt.age)
			r := tab.LoadAt(w, tab.Now())
			if tt.wantNil {
				if r != nil {
					t.Fatalf("Load = %+v, want unknown", r.Sample)
				}
				return
			}
			if r == nil {
				t.Fatal("Load = unknown, want a report")
			}
			if r.Sample != tt.want {
				t.Fatalf("Load = %+v\nwant   %+v", r.Sample, tt.want)
			}
		})
	}
}

func TestUpdateErrors(t *testing.T) {
	tab, _, _ := setup(2)
	if err := tab.Update("nope", 0, Sample{}); err == nil {
		t.Error("Update accepted an unknown engine")
	}
	for _, rank := range []int{-1, 2} {
		if err := tab.Update("E", rank, Sample{}); err == nil {
			t.Errorf("Update accepted rank %d of a 2-rank engine", rank)
		}
	}
}

func TestNilTableKnowsNothing(t *testing.T) {
	var tab *Table
	_, w, _ := setup(1)
	if tab.LoadAt(w, tab.Now()) != nil {
		t.Fatal("nil table returned a report")
	}
	g := tab.Acquire(w)
	if w.Inflight() != 1 {
		t.Fatalf("in-flight = %d after Acquire on a nil table, want 1", w.Inflight())
	}
	g.Release()
}

func TestDispatchesSinceReport(t *testing.T) {
	tab, w, _ := setup(1)
	before := tab.Acquire(w) // dispatched before the report: already in it
	if err := tab.Update("E", 0, Sample{At: t0}); err != nil {
		t.Fatal(err)
	}
	r := tab.LoadAt(w, tab.Now())
	g1, g2 := tab.Acquire(w), tab.Acquire(w)
	if got := r.DispatchesSince(); got != 2 {
		t.Fatalf("DispatchesSince = %d, want 2", got)
	}
	g1.Release()
	if got := r.DispatchesSince(); got != 2 {
		t.Fatalf("DispatchesSince after a release = %d, want 2 (dispatches, not in-flight)", got)
	}
	if err := tab.Update("E", 0, Sample{At: t0}); err != nil {
		t.Fatal(err)
	}
	if got := tab.LoadAt(w, tab.Now()).DispatchesSince(); got != 0 {
		t.Fatalf("DispatchesSince of a new report = %d, want 0", got)
	}
	before.Release()
	g2.Release()
}

func TestGuardReleaseIsIdempotent(t *testing.T) {
	tab, w, _ := setup(1)
	g := tab.Acquire(w)
	other := tab.Acquire(w)
	g.Release()
	g.Release()
	if got := w.Inflight(); got != 1 {
		t.Fatalf("in-flight = %d after releasing one of two guards twice, want 1", got)
	}
	other.Release()
	if got := w.Inflight(); got != 0 {
		t.Fatalf("in-flight = %d after releasing both guards, want 0", got)
	}
}

// TestConcurrentUpdatesAndReads is for the race detector: ranks update concurrently
// while readers load, and the final aggregate must reflect the last sample of each rank.
func TestConcurrentUpdatesAndReads(t *testing.T) {
	tab, w, _ := setup(4)
	var wg sync.WaitGroup
	for rank := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if err := tab.Update("E", rank, Sample{At: t0, Running: int64(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 500 {
			if r := tab.LoadAt(w, tab.Now()); r != nil && r.Running < 0 {
				t.Error("negative aggregate")
			}
			tab.Acquire(w).Release()
		}
	})
	wg.Wait()
	if r := tab.LoadAt(w, tab.Now()); r == nil || r.Running != 4*199 {
		t.Fatalf("final aggregate = %+v, want running %d", r, 4*199)
	}
}

func TestMonotonicClock(t *testing.T) {
	e := plan.Engine{ID: "E", DPSize: 1, Load: plan.LoadSource{StaleAfterMS: 60_000}}
	tab, w := NewTable([]plan.Engine{e}, nil), engine.New(e)
	if err := tab.Update("E", 0, Sample{At: time.Now(), Running: 1}); err != nil {
		t.Fatal(err)
	}
	if tab.LoadAt(w, tab.Now()) == nil {
		t.Fatal("a report stamped now is not fresh on the monotonic clock")
	}
	if tab.LoadAt(w, tab.Now()+Instant(61*time.Second)) != nil {
		t.Fatal("a report 61s old is fresh with a 60s window")
	}
}

// Workers find their slot by plan index when they have one, and by id otherwise: a worker
// registered later, or a registry built from a plan in another order, reads its own report.
func TestSlotsByIndexAndByID(t *testing.T) {
	engines := []plan.Engine{
		{ID: "A", Model: "m", Role: plan.RolePlain, DPSize: 1, Load: plan.LoadSource{StaleAfterMS: 1000}},
		{ID: "B", Model: "m", Role: plan.RolePlain, DPSize: 1, Load: plan.LoadSource{StaleAfterMS: 1000}},
	}
	c := &clock{now: t0}
	table := NewTable(engines, c.Now)
	for i, id := range []string{"A", "B"} {
		if err := table.Update(id, 0, Sample{At: t0, Running: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	inOrder, _ := engine.FromPlan(engines)
	reversed, _ := engine.FromPlan([]plan.Engine{engines[1], engines[0]})
	for name, w := range map[string]*engine.Worker{
		"plan order": inOrder.Get("B"), "other order": reversed.Get("B"), "no index": engine.New(engines[1]),
	} {
		if r := table.Load(w, t0); r == nil || r.Running != 2 {
			t.Errorf("%s: B read %+v, want its own report (running 2)", name, r)
		}
	}
}

// TestAddRemoveReusesSlots: engines coming and going keep the table at its largest
// membership; a removed engine's load is unknown and a re-added one starts empty.
func TestAddRemoveReusesSlots(t *testing.T) {
	now := time.Unix(1000, 0)
	tb := NewTable([]plan.Engine{{ID: "A", DPSize: 1}}, func() time.Time { return now })
	for i := range 50 {
		e := plan.Engine{ID: fmt.Sprintf("E%d", i), DPSize: 1}
		w := engine.New(e)
		w.SetIndex(tb.Add(e))
		if w.Index() != 1 {
			t.Fatalf("engine %d got slot %d, want the freed slot 1", i, w.Index())
		}
		if err := tb.Update(e.ID, 0, Sample{At: now, Running: 3}); err != nil {
			t.Fatal(err)
		}
		if r := tb.Load(w, now); r == nil || r.Running != 3 {
			t.Fatalf("load of the added engine: %+v", r)
		}
		tb.Remove(e.ID)
		if tb.Load(w, now) != nil || tb.Update(e.ID, 0, Sample{At: now}) == nil {
			t.Fatal("a removed engine still has a load slot")
		}
	}
	if tb.Len() != 1 || tb.Slots() != 2 {
		t.Errorf("table of %d engines has %d slots", tb.Len(), tb.Slots())
	}
}
