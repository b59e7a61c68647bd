// Package monitor keeps the router's view of its engines current: it polls each engine's
// health and load report in the background, marks engines unhealthy after consecutive
// failed checks (and healthy again after consecutive good ones), and publishes load
// samples into the shared load table that policies read.
package monitor

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
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
	// EngineTLS is the TLS client configuration of https engines (engine_tls); nil is
	// Go's defaults. Set it before Run or CheckAll.
	EngineTLS *tls.Config
	health    plan.Health
	reg       *engine.Registry
	table     *load.Table
	// client carries every poll when set (tests inject one); nil polls plain-HTTP
	// engines over connections of their own loops and the rest through fallback.
	client         *http.Client
	connectTimeout time.Duration
	// netHTTP polls every engine through fallback (engine_transport: net_http, the
	// switch back from the router's own HTTP reading to net/http's).
	netHTTP        bool
	fallbackOnce   sync.Once
	fallbackClient *http.Client
	now            func() time.Time
	rnd            func() float64 // uniform in [0, 1): the phases and jitter of polls
	log            *slog.Logger

	// setMu serialises SetEngines with Run's start and end, so an engine's loops are
	// started and stopped by one caller at a time. It is held while stopped loops
	// finish, which is why the loops themselves never take it.
	setMu   sync.Mutex
	engines []plan.Engine
	runCtx  context.Context // Run's context while it runs; nil before and after
	pollers map[string]*poller
	shards  []*shard // while Run runs, on Linux

	mu     sync.Mutex
	status map[string]*Status

	// changed learns of an engine whose capacity may have changed (OnChange).
	changed func(engineID string)
}

// OnChange sets f, called (before Run) with an engine's id when its load report was
// published or its health came back, so requests waiting for capacity try again
// (runtime/queue).
func (m *Monitor) OnChange(f func(engineID string)) { m.changed = f }

// change calls the OnChange function.
func (m *Monitor) change(id string) {
	if m.changed != nil {
		m.changed(id)
	}
}

// shardsOff sends every engine to a loop of its own, as before shards
// (ROUTER_MONITOR_SHARDS=off in the environment; docs/differences.md).
var shardsOff = os.Getenv("ROUTER_MONITOR_SHARDS") == "off"

// shardSize is how many engines one shard polls. Fewer shards wake the process less
// often; more spread a large fleet over the cores.
const shardSize = 512

// poller is the polling of one engine, by a loop of its own or a shard.
type poller struct {
	engine plan.Engine
	// stop ends the polling and waits for it, so nothing it does lands after stop
	// returns.
	stop func()
}

// New returns a monitor of the plan's engines that updates reg's health flags and table's
// load reports. A nil client is production: each engine's loop keeps a connection of
// its own (see newFetcher); a client carries every poll instead. Per-request timeouts
// come from the plan.
func New(p *plan.Plan, reg *engine.Registry, table *load.Table, client *http.Client, log *slog.Logger) *Monitor {
	connect := time.Duration(p.Timeouts.ConnectMS) * time.Millisecond
	if connect <= 0 {
		connect = 5 * time.Second
	}
	m := &Monitor{
		engines: p.Engines, health: p.Health, reg: reg, table: table, client: client, connectTimeout: connect,
		netHTTP: p.EngineTransport == plan.TransportNetHTTP,
		now:     time.Now, rnd: rand.Float64, log: log, pollers: map[string]*poller{}, status: map[string]*Status{},
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

// start begins polling e under ctx: in a shard when the monitor speaks to e over
// connections of its own and the system has shards (and they are not switched off),
// else in a loop of e's own. The
// caller holds setMu.
func (m *Monitor) start(ctx context.Context, e plan.Engine) {
	if u := m.direct(e.URL); u != nil && !shardsOff {
		if s := m.shardWithRoom(); s != nil {
			s.size++
			stop := s.add(e, u)
			m.pollers[e.ID] = &poller{engine: e, stop: func() { stop(); s.size-- }}
			return
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { m.pollLoop(ctx, e) })
	m.pollers[e.ID] = &poller{engine: e, stop: func() { cancel(); wg.Wait() }}
}

// shardWithRoom returns a shard polling fewer than shardSize engines, starting one
// when none has room, or nil when shards cannot run here. The caller holds setMu.
func (m *Monitor) shardWithRoom() *shard {
	for _, s := range m.shards {
		if s.size < shardSize {
			return s
		}
	}
	s, err := newShard(m)
	if err != nil {
		m.log.Debug("engines polled by loops of their own", "reason", err)
		return nil
	}
	m.shards = append(m.shards, s)
	return s
}

// CheckAll runs one health check of every engine at once and applies the results
// directly, without thresholds, and polls every engine's load once. serve calls it
// before it starts listening, so the first requests do not go to engines that are down
// and find load reports: Run's first polls come at random phases within the interval.
func (m *Monitor) CheckAll(ctx context.Context) {
	m.setMu.Lock()
	engines := m.engines
	m.setMu.Unlock()
	var wg sync.WaitGroup
	for _, e := range engines {
		wg.Go(func() {
			f := m.newFetcher(e.URL)
			defer f.close()
			err := m.checkHealth(ctx, f)
			m.setHealth(e.ID, err == nil, err)
			if err == nil && e.Load.Source != "none" {
				m.recordLoad(e.ID, m.pollLoad(ctx, f, e, map[int]string{}))
			}
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
	for _, s := range m.shards {
		s.stop()
	}
	m.shards = nil
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

// pollLoop polls one engine until ctx is done: its load report and /health as its
// schedule says, on one goroutine and one timer.
func (m *Monitor) pollLoop(ctx context.Context, e plan.Engine) {
	var loadEvery time.Duration
	if e.Load.Source != "none" {
		loadEvery = time.Duration(e.Load.IntervalMS) * time.Millisecond
	}
	healthEvery := time.Duration(m.health.IntervalMS) * time.Millisecond
	sched := newSchedule(loadEvery, healthEvery, m.rnd)
	slot := wakeSlot(loadEvery, healthEvery)
	sched.start(m.now())
	stamps := map[int]string{} // each rank's last engine timestamp
	f := m.newFetcher(e.URL)
	defer f.close()
	timer := time.NewTimer(time.Until(alignUp(sched.wake(), slot)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := m.now()
		countsAsHealth := false
		if sched.loadDue(now) {
			err := m.pollLoad(ctx, f, e, stamps)
			if ctx.Err() != nil {
				return
			}
			m.recordLoad(e.ID, err)
			countsAsHealth = sched.loaded(now, err == nil)
			if err == nil {
				m.change(e.ID)
			}
		}
		switch {
		case sched.probeDue(now):
			err := m.checkHealth(ctx, f)
			if ctx.Err() != nil {
				return
			}
			sched.probed(now, err == nil)
			m.recordCheck(e.ID, err)
		case countsAsHealth:
			m.recordCheck(e.ID, nil)
		}
		timer.Reset(time.Until(alignUp(sched.wake(), slot)))
	}
}

// recordCheck counts one health check of engine id, a /health probe or a load poll
// standing in for one, and applies the thresholds.
func (m *Monitor) recordCheck(id string, err error) {
	m.mu.Lock()
	s := m.status[id] // there while the loop runs: SetEngines stops it first
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
	m.setHealth(id, healthy, err)
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
		m.change(id)
	}
}

func (m *Monitor) checkHealth(ctx context.Context, f fetcher) error {
	_, err := f.get(ctx, "/health", time.Duration(m.health.TimeoutMS)*time.Millisecond)
	return err
}

// fallback is the client of engines a connection of their own cannot reach.
func (m *Monitor) fallback() *http.Client {
	m.fallbackOnce.Do(func() { m.fallbackClient = newClient(m.connectTimeout, m.EngineTLS) })
	return m.fallbackClient
}

func (m *Monitor) recordLoad(id string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.status[id]
	if s == nil { // a CheckAll poll of an engine SetEngines removed meanwhile
		return
	}
	s.LoadError = errString(err)
	if err == nil {
		s.LastLoadAt = m.now()
	}
}

// loadPaths maps a plan load source to the endpoint that serves it.
var loadPaths = map[string]string{"loads": "/v1/loads", "get_load": "/get_load", "metrics": "/metrics"}

// pollLoad fetches one load report and publishes its ranks. A failed or malformed report
// publishes nothing: the previous report ages out and the engine's load becomes unknown,
// never zero. So does a rank whose engine timestamp has not moved since the last poll: a
// stuck publisher repeating an old report must not look fresh because it answers.
func (m *Monitor) pollLoad(ctx context.Context, f fetcher, e plan.Engine, stamps map[int]string) error {
	body, err := f.get(ctx, loadPaths[e.Load.Source], loadTimeout(e))
	if err != nil {
		return err
	}
	return m.publishLoad(e, body, stamps)
}

// loadTimeout is how long a load poll of e may take: its interval, or less when the
// report goes stale sooner.
func loadTimeout(e plan.Engine) time.Duration {
	return time.Duration(min(e.Load.IntervalMS, e.Load.StaleAfterMS)) * time.Millisecond
}

// publishLoad parses a load report of e and publishes its ranks; stamps holds each
// rank's last engine timestamp.
func (m *Monitor) publishLoad(e plan.Engine, body []byte, stamps map[int]string) error {
	at := m.now()
	var err error
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

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
