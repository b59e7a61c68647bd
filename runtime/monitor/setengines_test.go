package monitor

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// newFake starts a real HTTP engine that answers its health checks with status and
// its load polls with one rank's report.
func newFake(t *testing.T, status int) (*fakeEngine, string) {
	t.Helper()
	f := &fakeEngine{}
	f.healthStatus.Store(int32(status))
	f.loadBody.Store(`{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 0}]}`)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func pollEvery5ms(id, url string) plan.Engine {
	return plan.Engine{ID: id, URL: url, Model: "m", Role: plan.RolePlain, DPSize: 1,
		Load: plan.LoadSource{Source: "loads", IntervalMS: 5, StaleAfterMS: 60000}}
}

// newSetMonitor builds a monitor of engines whose registry and load table know every
// engine of all, as a reload would have them before it calls SetEngines.
func newSetMonitor(t *testing.T, h plan.Health, engines, all []plan.Engine) (*engine.Registry, *Monitor) {
	t.Helper()
	reg, err := engine.FromPlan(all)
	if err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{Health: h, Engines: engines}
	return reg, New(p, reg, load.NewTable(all, time.Now), nil, slog.New(slog.DiscardHandler))
}

func run(t *testing.T, m *Monitor) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// TestSetEnginesWhileRunning: an engine that stays keeps its loops and status, one that
// leaves stops being polled and is forgotten, a new one is polled, and one whose URL
// changed starts over at the new URL.
func TestSetEnginesWhileRunning(t *testing.T) {
	// A status needs 1000 good checks to turn healthy again, so an engine's status that
	// went unhealthy stays so unless the monitor starts it over.
	h := plan.Health{IntervalMS: 5, TimeoutMS: 1000, FailureThreshold: 1, SuccessThreshold: 1000}
	a, urlA := newFake(t, 503)
	b, urlB := newFake(t, 200)
	c, urlC := newFake(t, 200)
	d, urlD := newFake(t, 200)
	e1, e2, e3 := pollEvery5ms("E1", urlA), pollEvery5ms("E2", urlB), pollEvery5ms("E3", urlC)
	reg, m := newSetMonitor(t, h, []plan.Engine{e1, e2}, []plan.Engine{e1, e2, e3})
	run(t, m)
	wait.For(t, "E1 unhealthy", func() bool { return !reg.Get("E1").Healthy() })
	wait.For(t, "E2 polled", func() bool { return m.Status()["E2"].Successes >= 2 })
	before := m.Status()["E1"]

	m.SetEngines([]plan.Engine{e1, e3})
	gone := b.polls()
	st := m.Status()
	if _, ok := st["E2"]; ok {
		t.Errorf("a removed engine's status must be forgotten: %+v", st)
	}
	if s := st["E1"]; s.Healthy || s.Failures < before.Failures {
		t.Errorf("an unchanged engine must keep its status: was %+v, now %+v", before, s)
	}
	wait.For(t, "E3 polled", func() bool { return c.polls() >= 10 && m.Status()["E3"].Successes >= 1 })
	// Polls already on the wire when SetEngines returned may still be answered, one per loop.
	if n := b.polls() - gone; n > 2 {
		t.Errorf("the removed engine got %d polls after SetEngines returned", n)
	}

	// E1 moves to a healthy server: a different thing to poll, so its status starts over.
	moved := e1
	moved.URL = urlD
	m.SetEngines([]plan.Engine{moved, e3})
	gone = a.polls()
	if s := m.Status()["E1"]; !s.Healthy || s.Failures != 0 {
		t.Errorf("a moved engine's status must start over: %+v", s)
	}
	wait.For(t, "E1 polled at its new URL", func() bool { return d.polls() >= 10 && reg.Get("E1").Healthy() })
	if n := a.polls() - gone; n > 2 {
		t.Errorf("the old URL got %d polls after SetEngines returned", n)
	}
}

// TestSetEnginesBeforeRun: Run polls the engines last set, not the plan's.
func TestSetEnginesBeforeRun(t *testing.T) {
	h := plan.Health{IntervalMS: 5, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2}
	a, urlA := newFake(t, 200)
	b, urlB := newFake(t, 200)
	e1, e2 := pollEvery5ms("E1", urlA), pollEvery5ms("E2", urlB)
	_, m := newSetMonitor(t, h, []plan.Engine{e1}, []plan.Engine{e1, e2})
	m.SetEngines([]plan.Engine{e2})
	run(t, m)
	wait.For(t, "E2 polled", func() bool { return b.polls() >= 5 })
	if n := a.polls(); n != 0 {
		t.Errorf("an engine removed before Run was polled %d times", n)
	}
	if st := m.Status(); len(st) != 1 || st["E2"].LoadError != "" {
		t.Errorf("status: %+v", st)
	}
}

// TestSetEnginesRacesRun: SetEngines from several goroutines while Run starts and stops
// leaves the status of the last set, and Run returns with no loop left (-race checks the
// locking).
func TestSetEnginesRacesRun(t *testing.T) {
	h := plan.Health{IntervalMS: 5, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2}
	var all []plan.Engine
	for i := range 6 {
		_, u := newFake(t, 200)
		all = append(all, pollEvery5ms(fmt.Sprintf("E%d", i), u))
	}
	_, m := newSetMonitor(t, h, all[:2], all)
	stop := run(t, m)
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := range 20 {
				m.SetEngines(all[(g+i)%4 : (g+i)%4+2])
			}
		})
	}
	wg.Wait()
	m.SetEngines(all[3:6])
	stop()
	if st := m.Status(); len(st) != 3 || st["E3"].Healthy != true || st["E5"].Healthy != true {
		t.Errorf("status after the last set: %+v", st)
	}
	if len(m.pollers) != 0 {
		t.Errorf("%d pollers left after Run returned", len(m.pollers))
	}
}
