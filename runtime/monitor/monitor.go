// Package monitor keeps the router's view of its engines current: it polls each engine's
// health and load report in the background, marks engines unhealthy after consecutive
// failed checks (and healthy again after consecutive good ones), and publishes load
// samples into the shared load table that policies read.
package monitor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// Status is what the monitor last saw of one engine, for the admin state.
type Status struct {
	Healthy     bool      `json:"healthy"`
	HealthError string    `json:"health_error,omitempty"`
	LoadError   string    `json:"load_error,omitempty"`
	LastLoadAt  time.Time `json:"last_load_at,omitzero"`
	Failures    int       `json:"consecutive_failures"`
	Successes   int       `json:"consecutive_successes"`
}

// Monitor polls engines. Build it with New, start it with Run, and change the set of
// engines it polls with SetEngines.
type Monitor struct {
	health plan.Health
	reg    *engine.Registry
	table  *load.Table
	client *http.Client
	now    func() time.Time
	log    *slog.Logger

	// setMu serialises SetEngines with Run's start and end, so an engine's loops are
	// started and stopped by one caller at a time. It is held while stopped loops
	// finish, which is why the loops themselves never take it.
	setMu   sync.Mutex
	engines []plan.Engine
	runCtx  context.Context // Run's context while it runs; nil before and after
	pollers map[string]*poller

	mu     sync.Mutex
	status map[string]*Status
}

// poller is the running loops of one engine.
type poller struct {
	engine plan.Engine
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stop ends the loops and waits for them, so nothing they do lands after it returns.
func (p *poller) stop() {
	p.cancel()
	p.wg.Wait()
}

// New returns a monitor of the plan's engines that updates reg's health flags and table's
// load reports. client carries the transport; per-request timeouts come from the plan.
func New(p *plan.Plan, reg *engine.Registry, table *load.Table, client *http.Client, log *slog.Logger) *Monitor {
	m := &Monitor{
		engines: p.Engines, health: p.Health, reg: reg, table: table, client: client,
		now: time.Now, log: log, pollers: map[string]*poller{}, status: map[string]*Status{},
	}
	for _, e := range p.Engines {
		m.status[e.ID] = &Status{Healthy: true}
	}
	return m
}

// SetEngines replaces the engines the monitor polls, before or while Run runs. Engines
// not listed before start being polled (their status starts healthy, as New's do);
// engines no longer listed stop being polled and their status is forgotten; engines
// listed with the same ID, URL, DP size and load source keep their loops, status and
// frozen-report stamps. An engine whose URL, DP size or load source changed is a
// different thing to poll: its loops restart and its status starts over. When it
// returns, no loop of a removed or changed engine is still running, so nothing of the
// old engine reaches the registry, the load table or the status after it.
func (m *Monitor) SetEngines(engines []plan.Engine) {
	m.setMu.Lock()
	defer m.setMu.Unlock()
	next := make(map[string]plan.Engine, len(engines))
	for _, e := range engines {
		next[e.ID] = e
	}
	// Stop what changed or left before touching its status, so an old loop never writes
	// into the status of the engine that replaces it, and an engine never has two sets
	// of loops.
	for id, p := range m.pollers {
		if e, ok := next[id]; !ok || !samePolling(p.engine, e) {
			p.stop()
			delete(m.pollers, id)
		}
	}
	m.mu.Lock()
	for _, old := range m.engines {
		if e, ok := next[old.ID]; !ok || !samePolling(old, e) {
			delete(m.status, old.ID)
		}
	}
	for _, e := range engines {
		if m.status[e.ID] == nil {
			m.status[e.ID] = &Status{Healthy: true}
		}
	}
	m.mu.Unlock()
	m.engines = engines
	if m.runCtx != nil {
		for _, e := range engines {
			if m.pollers[e.ID] == nil {
				m.start(m.runCtx, e)
			}
		}
	}
}

// samePolling reports whether two versions of an engine are polled the same way.
func samePolling(a, b plan.Engine) bool {
	return a.ID == b.ID && a.URL == b.URL && a.DPSize == b.DPSize && a.Load == b.Load
}

// start begins polling e under ctx. The caller holds setMu.
func (m *Monitor) start(ctx context.Context, e plan.Engine) {
	ctx, cancel := context.WithCancel(ctx)
	p := &poller{engine: e, cancel: cancel}
	p.wg.Go(func() { m.healthLoop(ctx, e) })
	if e.Load.Source != "none" {
		p.wg.Go(func() { m.loadLoop(ctx, e) })
	}
	m.pollers[e.ID] = p
}

// CheckAll runs one health check of every engine at once and applies the results
// directly, without thresholds. serve calls it before it starts listening, so the first
// requests do not go to engines that are down.
func (m *Monitor) CheckAll(ctx context.Context) {
	m.setMu.Lock()
	engines := m.engines
	m.setMu.Unlock()
	var wg sync.WaitGroup
	for _, e := range engines {
		wg.Go(func() {
			err := m.checkHealth(ctx, e)
			m.setHealth(e.ID, err == nil, err)
		})
	}
	wg.Wait()
}

// Run polls every engine until ctx is done, and returns when every loop has ended.
func (m *Monitor) Run(ctx context.Context) {
	m.setMu.Lock()
	m.runCtx = ctx
	for _, e := range m.engines {
		m.start(ctx, e)
	}
	m.setMu.Unlock()
	<-ctx.Done()
	m.setMu.Lock()
	defer m.setMu.Unlock()
	for id, p := range m.pollers {
		p.stop()
		delete(m.pollers, id)
	}
	m.runCtx = nil
}

// Status returns a copy of what the monitor last saw of each engine.
func (m *Monitor) Status() map[string]Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Status, len(m.status))
	for id, s := range m.status {
		out[id] = *s
	}
	return out
}

func (m *Monitor) healthLoop(ctx context.Context, e plan.Engine) {
	every(ctx, time.Duration(m.health.IntervalMS)*time.Millisecond, func() {
		err := m.checkHealth(ctx, e)
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		s := m.status[e.ID] // there while the loop runs: SetEngines stops it first
		if err == nil {
			s.Successes, s.Failures = s.Successes+1, 0
		} else {
			s.Successes, s.Failures = 0, s.Failures+1
		}
		healthy := s.Healthy
		switch {
		case healthy && s.Failures >= m.health.FailureThreshold:
			healthy = false
		case !healthy && s.Successes >= m.health.SuccessThreshold:
			healthy = true
		}
		m.mu.Unlock()
		m.setHealth(e.ID, healthy, err)
	})
}

func (m *Monitor) setHealth(id string, healthy bool, err error) {
	m.mu.Lock()
	s := m.status[id]
	if s == nil { // a CheckAll result for an engine SetEngines removed meanwhile
		m.mu.Unlock()
		return
	}
	was := s.Healthy
	s.Healthy, s.HealthError = healthy, errString(err)
	m.mu.Unlock()
	if w := m.reg.Get(id); w != nil {
		w.SetHealthy(healthy)
	}
	// Losing an engine is a warning; getting it back is news, not a problem, so an alert
	// on WARN lines does not fire again when the fleet recovers.
	switch {
	case was && !healthy:
		m.log.Warn("engine health changed", "engine", id, "healthy", false, "error", errString(err))
	case !was && healthy:
		m.log.Info("engine health changed", "engine", id, "healthy", true)
	}
}

func (m *Monitor) checkHealth(ctx context.Context, e plan.Engine) error {
	body, err := m.get(ctx, e.URL+"/health", time.Duration(m.health.TimeoutMS)*time.Millisecond)
	if err != nil {
		return err
	}
	return body.Close()
}

func (m *Monitor) loadLoop(ctx context.Context, e plan.Engine) {
	stamps := map[int]string{} // each rank's last engine timestamp
	every(ctx, time.Duration(e.Load.IntervalMS)*time.Millisecond, func() {
		err := m.pollLoad(ctx, e, stamps)
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		s := m.status[e.ID]
		s.LoadError = errString(err)
		if err == nil {
			s.LastLoadAt = m.now()
		}
	})
}

// loadPaths maps a plan load source to the endpoint that serves it.
var loadPaths = map[string]string{"loads": "/v1/loads", "get_load": "/get_load", "metrics": "/metrics"}

// pollLoad fetches one load report and publishes its ranks. A failed or malformed report
// publishes nothing: the previous report ages out and the engine's load becomes unknown,
// never zero. So does a rank whose engine timestamp has not moved since the last poll: a
// stuck publisher repeating an old report must not look fresh because it answers.
func (m *Monitor) pollLoad(ctx context.Context, e plan.Engine, stamps map[int]string) error {
	timeout := time.Duration(min(e.Load.IntervalMS, e.Load.StaleAfterMS)) * time.Millisecond
	body, err := m.get(ctx, e.URL+loadPaths[e.Load.Source], timeout)
	if err != nil {
		return err
	}
	defer body.Close()
	at := m.now()
	var ranks []rankSample
	switch e.Load.Source {
	case "loads":
		ranks, err = parseLoads(body, at)
	case "get_load":
		ranks, err = parseGetLoad(body, at)
	case "metrics":
		ranks, err = parseMetrics(body, at, e.DPSize)
	}
	if err != nil {
		return err
	}
	var frozen []string
	for _, r := range ranks {
		if r.stamp != "" && r.stamp == stamps[r.rank] {
			frozen = append(frozen, fmt.Sprintf("rank %d (engine timestamp %s)", r.rank, r.stamp))
			continue
		}
		stamps[r.rank] = r.stamp
		if err := m.table.Update(e.ID, r.rank, r.Sample); err != nil {
			return err
		}
	}
	if len(frozen) > 0 {
		return fmt.Errorf("load report did not advance since the last poll for %s: the engine's load publisher looks stuck", strings.Join(frozen, ", "))
	}
	return nil
}

// get fetches url, returning the body of a 2xx response.
func (m *Monitor) get(ctx context.Context, url string, timeout time.Duration) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	return cancelOnClose{resp.Body, cancel}, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// every runs f now and then at each tick until ctx is done.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
