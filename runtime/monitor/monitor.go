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
	"reflect"
	"slices"
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

// Monitor polls engines. Build it with New and start it with Run.
type Monitor struct {
	engines []plan.Engine
	health  plan.Health
	reg     *engine.Registry
	table   *load.Table
	client  *http.Client
	now     func() time.Time
	log     *slog.Logger

	mu     sync.Mutex
	status map[string]*Status
	// runCtx is Run's context while it runs (nil before), and pollers the engines being
	// polled under it, so SetEngines can start and stop engines' loops.
	runCtx  context.Context
	pollers map[string]*poller
	wg      sync.WaitGroup
}

// poller is one engine's running health and load loops.
type poller struct {
	engine plan.Engine
	stop   context.CancelFunc
}

// New returns a monitor of the plan's engines that updates reg's health flags and table's
// load reports. client carries the transport; per-request timeouts come from the plan.
func New(p *plan.Plan, reg *engine.Registry, table *load.Table, client *http.Client, log *slog.Logger) *Monitor {
	m := &Monitor{
		engines: p.Engines, health: p.Health, reg: reg, table: table, client: client,
		now: time.Now, log: log, status: map[string]*Status{},
	}
	for _, e := range p.Engines {
		m.status[e.ID] = &Status{Healthy: true}
	}
	return m
}

// CheckAll runs one health check of every engine at once and applies the results
// directly, without thresholds. serve calls it before it starts listening, so the first
// requests do not go to engines that are down.
func (m *Monitor) CheckAll(ctx context.Context) {
	var wg sync.WaitGroup
	m.mu.Lock()
	engines := m.engines
	m.mu.Unlock()
	for _, e := range engines {
		wg.Go(func() {
			err := m.checkHealth(ctx, e)
			m.setHealth(e.ID, err == nil, err)
		})
	}
	wg.Wait()
}

// Run polls every engine until ctx is done, following SetEngines.
func (m *Monitor) Run(ctx context.Context) {
	m.mu.Lock()
	m.runCtx, m.pollers = ctx, map[string]*poller{}
	for _, e := range m.engines {
		m.startLocked(e)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.wg.Wait()
}

// startLocked starts an engine's loops under Run's context; call with m.mu held.
func (m *Monitor) startLocked(e plan.Engine) {
	ctx, stop := context.WithCancel(m.runCtx)
	m.pollers[e.ID] = &poller{engine: e, stop: stop}
	m.wg.Go(func() { m.healthLoop(ctx, e) })
	if e.Load.Source != "none" {
		m.wg.Go(func() { m.loadLoop(ctx, e) })
	}
}

// SetEngines makes engines the set the monitor polls: an engine kept with the same
// configuration keeps its loops and status, a new or changed one starts afresh (healthy
// until its checks say otherwise, like every engine at startup), and one no longer listed
// stops being polled and loses its status.
func (m *Monitor) SetEngines(engines []plan.Engine) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := make(map[string]plan.Engine, len(engines))
	for _, e := range engines {
		want[e.ID] = e
	}
	for _, e := range m.engines {
		if n, ok := want[e.ID]; !ok || !reflect.DeepEqual(n, e) {
			delete(m.status, e.ID)
			if p := m.pollers[e.ID]; p != nil {
				p.stop()
				delete(m.pollers, e.ID)
			}
		}
	}
	for _, e := range engines {
		if m.status[e.ID] == nil {
			m.status[e.ID] = &Status{Healthy: true}
			if m.runCtx != nil && m.runCtx.Err() == nil {
				m.startLocked(e)
			}
		}
	}
	m.engines = slices.Clone(engines)
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
		s := m.status[e.ID]
		if s == nil { // removed while the check ran
			m.mu.Unlock()
			return
		}
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
	if s == nil { // removed while the check ran
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
		if s == nil { // removed while the poll ran
			return
		}
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
