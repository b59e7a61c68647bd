package monitor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// fakeEngine is a real HTTP server whose health and load answers the test switches.
type fakeEngine struct {
	healthStatus atomic.Int32
	loadBody     atomic.Value // string
	healthChecks atomic.Int32
	loadPolls    atomic.Int32
}

// polls counts every request the engine answered.
func (f *fakeEngine) polls() int32 { return f.healthChecks.Load() + f.loadPolls.Load() }

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/health":
		f.healthChecks.Add(1)
		w.WriteHeader(int(f.healthStatus.Load()))
	case "/v1/loads":
		f.loadPolls.Add(1)
		io.WriteString(w, f.loadBody.Load().(string))
	default:
		http.NotFound(w, r)
	}
}

func startMonitor(t *testing.T, f *fakeEngine, h plan.Health) (*engine.Worker, *load.Table, *Monitor) {
	return startMonitorStale(t, f, h, 60000)
}

// startMonitorStale is startMonitor with the load reports' freshness window; onChange,
// when given, is the monitor's OnChange function.
func startMonitorStale(t *testing.T, f *fakeEngine, h plan.Health, staleAfterMS int, onChange ...func(string)) (*engine.Worker, *load.Table, *Monitor) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	p := &plan.Plan{Health: h, Engines: []plan.Engine{{
		ID: "E1", URL: srv.URL, Model: "m", Role: plan.RolePlain, DPSize: 1,
		Load: plan.LoadSource{Source: "loads", IntervalMS: 5, StaleAfterMS: staleAfterMS},
	}}}
	reg, err := engine.FromPlan(p.Engines)
	if err != nil {
		t.Fatal(err)
	}
	table := load.NewTable(p.Engines, time.Now)
	m := New(p, reg, table, nil, slog.New(slog.DiscardHandler))
	for _, f := range onChange {
		m.OnChange(f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return reg.Get("E1"), table, m
}

func TestHealthThresholds(t *testing.T) {
	f := &fakeEngine{}
	f.healthStatus.Store(200)
	f.loadBody.Store(`{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 0}]}`)
	w, _, m := startMonitor(t, f, plan.Health{IntervalMS: 2, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2})

	f.healthStatus.Store(503)
	start := f.healthChecks.Load()
	wait.For(t, "engine marked unhealthy", func() bool { return !w.Healthy() })
	// It took at least the failure threshold of failed checks.
	if n := f.healthChecks.Load() - start; n < 3 {
		t.Errorf("unhealthy after %d checks, want at least 3", n)
	}
	if s := m.Status()["E1"]; s.HealthError == "" {
		t.Errorf("status must carry the failure: %+v", s)
	}

	// Back in good health it takes two good checks: a /health probe, then either
	// another or a load poll, which counts once /health answered.
	f.healthStatus.Store(200)
	start = f.polls()
	wait.For(t, "engine healthy again", w.Healthy)
	if n := f.polls() - start; n < 2 {
		t.Errorf("healthy again after %d checks, want at least 2", n)
	}
}

func TestLoadReportsReachTheTable(t *testing.T) {
	f := &fakeEngine{}
	f.healthStatus.Store(200)
	f.loadBody.Store(`{"loads": [{"dp_rank": 0, "num_running_reqs": 7, "num_waiting_reqs": 3,
		"num_waiting_uncached_tokens": 100, "num_used_tokens": 10, "max_total_num_tokens": 1000}]}`)
	w, table, m := startMonitor(t, f, plan.Health{IntervalMS: 1000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2})
	wait.For(t, "a load report", func() bool { return table.Load(w, time.Now()) != nil })
	r := table.Load(w, time.Now())
	if r.Running != 7 || r.Waiting != 3 || !r.Native || r.WaitingUncachedTokens != 100 {
		t.Errorf("report: %+v", r.Sample)
	}

	// A malformed report is an error in the status, and publishes nothing new.
	f.loadBody.Store(`{"loads": "garbage"}`)
	wait.For(t, "the load error", func() bool { return m.Status()["E1"].LoadError != "" })
	if r := table.Load(w, time.Now()); r == nil || r.Running != 7 {
		t.Errorf("a malformed report must not replace the last good one: %+v", r)
	}
}

func TestCheckAllAppliesAtOnce(t *testing.T) {
	f := &fakeEngine{}
	f.healthStatus.Store(500)
	srv := httptest.NewServer(f)
	defer srv.Close()
	p := &plan.Plan{Health: plan.Health{IntervalMS: 1000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2},
		Engines: []plan.Engine{{ID: "E1", URL: srv.URL, Model: "m", Role: plan.RolePlain, DPSize: 1}}}
	reg, _ := engine.FromPlan(p.Engines)
	m := New(p, reg, load.NewTable(p.Engines, time.Now), srv.Client(), slog.New(slog.DiscardHandler))
	m.CheckAll(context.Background())
	if reg.Get("E1").Healthy() {
		t.Error("an engine failing its first check must start unhealthy")
	}
}

func TestFrozenReportBecomesUnknown(t *testing.T) {
	f := &fakeEngine{}
	f.healthStatus.Store(200)
	// The engine answers, but its report's own timestamp never moves: a stuck publisher.
	f.loadBody.Store(`{"timestamp": "2026-12-02T12:00:00Z", "loads": [{"dp_rank": 0, "timestamp": 1764676800.5,
		"num_running_reqs": 3, "num_waiting_reqs": 0}]}`)
	w, table, m := startMonitorStale(t, f, plan.Health{IntervalMS: 1000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2}, 50)
	// The first report is fresh for only 50 ms, which a busy machine can sleep through:
	// wait for its receipt, not for a moment it is fresh.
	wait.For(t, "the first report", func() bool { return !m.Status()["E1"].LastLoadAt.IsZero() })
	wait.For(t, "the frozen report to go stale", func() bool { return table.Load(w, time.Now()) == nil })
	if s := m.Status()["E1"]; !strings.Contains(s.LoadError, "did not advance") {
		t.Errorf("status must say the report is stuck: %+v", s)
	}

	// A moving timestamp publishes again.
	f.loadBody.Store(`{"loads": [{"dp_rank": 0, "timestamp": 1764676801.5, "num_running_reqs": 4, "num_waiting_reqs": 0}]}`)
	wait.For(t, "a fresh report", func() bool { r := table.Load(w, time.Now()); return r != nil && r.Running == 4 })
}

// TestLoadPollsCountAsHealthChecks: once /health has answered, good load polls are
// health checks, so an engine comes back into rotation on them without more probes.
func TestLoadPollsCountAsHealthChecks(t *testing.T) {
	f, url := newFake(t, 200)
	e := pollEvery5ms("E1", url)
	// A load poll's timeout is its interval: at 5 ms one timed out under -race on a
	// loaded machine, which rightly brings a probe forward. 50 ms keeps the test's point.
	e.Load.IntervalMS = 50
	// The first probe comes at once (rnd 0) and the next not for five hours.
	h := plan.Health{IntervalMS: 3_600_000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 3}
	reg, m := newSetMonitor(t, h, []plan.Engine{e}, []plan.Engine{e})
	m.rnd = func() float64 { return 0 }
	m.setHealth("E1", false, errors.New("down at start"))
	run(t, m)
	wait.For(t, "E1 back in rotation", reg.Get("E1").Healthy)
	if n := f.healthChecks.Load(); n != 1 {
		t.Errorf("%d /health probes, want the one before load polls count", n)
	}
	if s := m.Status()["E1"]; s.HealthError != "" || s.Successes < 3 {
		t.Errorf("status: %+v", s)
	}
}

// TestDrainingEngineLeavesRotation: an engine that answers /health with 503 while it
// keeps serving load reports (SGLang draining) leaves rotation after failure_threshold
// probes, and its good load polls do not bring it back.
func TestDrainingEngineLeavesRotation(t *testing.T) {
	f, url := newFake(t, 200)
	e := pollEvery5ms("E1", url)
	// Several load polls (every 5 ms, so every wake slot) fall between two probes
	// (every 100 ms), so were they counted the failures would never add up.
	h := plan.Health{IntervalMS: 100, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2}
	reg, m := newSetMonitor(t, h, []plan.Engine{e}, []plan.Engine{e})
	run(t, m)
	wait.For(t, "load polls counting as health", func() bool { return m.Status()["E1"].Successes >= 5 })

	f.healthStatus.Store(503) // draining: /v1/loads still answers
	wait.For(t, "the draining engine out of rotation", func() bool { return !reg.Get("E1").Healthy() })
	polls := f.loadPolls.Load()
	wait.For(t, "more load polls", func() bool { return f.loadPolls.Load() >= polls+10 })
	if reg.Get("E1").Healthy() {
		t.Error("good load polls of an engine failing /health brought it back")
	}
	if s := m.Status()["E1"]; s.Successes != 0 || !strings.Contains(s.HealthError, "503") || s.LoadError != "" {
		t.Errorf("status: %+v", s)
	}
}

// TestCheckAllPollsLoad: the start-up check also polls each healthy engine's load once,
// so the first requests find reports although Run's first polls come at random phases.
func TestCheckAllPollsLoad(t *testing.T) {
	up, upURL := newFake(t, 200)
	down, downURL := newFake(t, 503)
	engines := []plan.Engine{pollEvery5ms("E1", upURL), pollEvery5ms("E2", downURL)}
	h := plan.Health{IntervalMS: 1000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2}
	reg, err := engine.FromPlan(engines)
	if err != nil {
		t.Fatal(err)
	}
	table := load.NewTable(engines, time.Now)
	m := New(&plan.Plan{Health: h, Engines: engines}, reg, table, nil, slog.New(slog.DiscardHandler))
	m.CheckAll(context.Background())
	if r := table.Load(reg.Get("E1"), time.Now()); r == nil || r.Running != 1 {
		t.Errorf("E1's report after CheckAll: %v", r)
	}
	if up.loadPolls.Load() != 1 || down.loadPolls.Load() != 0 {
		t.Errorf("load polls: healthy engine %d, want 1; failing engine %d, want 0", up.loadPolls.Load(), down.loadPolls.Load())
	}
	if st := m.Status(); st["E1"].LastLoadAt.IsZero() || st["E2"].Healthy {
		t.Errorf("status: %+v", st)
	}
}

// OnChange hears of an engine whose capacity may have changed: each published load
// report, and its health coming back (runtime/queue's waiters try again then).
func TestOnChange(t *testing.T) {
	f := &fakeEngine{}
	f.healthStatus.Store(200)
	f.loadBody.Store(`{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 0}]}`)
	var changes atomic.Int32
	w, _, _ := startMonitorStale(t, f, plan.Health{IntervalMS: 2, TimeoutMS: 1000, FailureThreshold: 1, SuccessThreshold: 1}, 60000, func(id string) {
		if id == "E1" {
			changes.Add(1)
		}
	})
	wait.For(t, "a change for a load report", func() bool { return changes.Load() > 0 })

	// Without good load reports, only the health coming back is a change.
	f.loadBody.Store(`{"loads": "garbage"}`)
	f.healthStatus.Store(503)
	wait.For(t, "engine unhealthy", func() bool { return !w.Healthy() })
	before := changes.Load()
	f.healthStatus.Store(200)
	wait.For(t, "engine healthy again", w.Healthy)
	wait.For(t, "a change for the recovery", func() bool { return changes.Load() > before })
}
