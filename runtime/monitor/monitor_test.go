package monitor

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

func startMonitorStale(t *testing.T, f *fakeEngine, h plan.Health, staleAfterMS int) (*engine.Worker, *load.Table, *Monitor) {
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
	m := New(p, reg, table, srv.Client(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return reg.Get("E1"), table, m
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestHealthThresholds(t *testing.T) {
	f := &fakeEngine{}
	f.healthStatus.Store(200)
	f.loadBody.Store(`{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 0}]}`)
	w, _, m := startMonitor(t, f, plan.Health{IntervalMS: 2, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2})

	f.healthStatus.Store(503)
	start := f.healthChecks.Load()
	waitFor(t, "engine marked unhealthy", func() bool { return !w.Healthy() })
	// It took at least the failure threshold of failed checks.
	if n := f.healthChecks.Load() - start; n < 3 {
		t.Errorf("unhealthy after %d checks, want at least 3", n)
	}
	if s := m.Status()["E1"]; s.HealthError == "" {
		t.Errorf("status must carry the failure: %+v", s)
	}

	f.healthStatus.Store(200)
	start = f.healthChecks.Load()
	waitFor(t, "engine healthy again", w.Healthy)
	if n := f.healthChecks.Load() - start; n < 2 {
		t.Errorf("healthy again after %d checks, want at least 2", n)
	}
}

func TestLoadReportsReachTheTable(t *testing.T) {
	f := &fakeEngine{}
	f.healthStatus.Store(200)
	f.loadBody.Store(`{"loads": [{"dp_rank": 0, "num_running_reqs": 7, "num_waiting_reqs": 3,
		"num_waiting_uncached_tokens": 100, "num_used_tokens": 10, "max_total_num_tokens": 1000}]}`)
	w, table, m := startMonitor(t, f, plan.Health{IntervalMS: 1000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 2})
	waitFor(t, "a load report", func() bool { return table.Load(w, time.Now()) != nil })
	r := table.Load(w, time.Now())
	if r.Running != 7 || r.Waiting != 3 || !r.Native || r.WaitingUncachedTokens != 100 {
		t.Errorf("report: %+v", r.Sample)
	}

	// A malformed report is an error in the status, and publishes nothing new.
	f.loadBody.Store(`{"loads": "garbage"}`)
	waitFor(t, "the load error", func() bool { return m.Status()["E1"].LoadError != "" })
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
	waitFor(t, "the first report", func() bool { return !m.Status()["E1"].LastLoadAt.IsZero() })
	waitFor(t, "the frozen report to go stale", func() bool { return table.Load(w, time.Now()) == nil })
	if s := m.Status()["E1"]; !strings.Contains(s.LoadError, "did not advance") {
		t.Errorf("status must say the report is stuck: %+v", s)
	}

	// A moving timestamp publishes again.
	f.loadBody.Store(`{"loads": [{"dp_rank": 0, "timestamp": 1764676801.5, "num_running_reqs": 4, "num_waiting_reqs": 0}]}`)
	waitFor(t, "a fresh report", func() bool { r := table.Load(w, time.Now()); return r != nil && r.Running == 4 })
}
