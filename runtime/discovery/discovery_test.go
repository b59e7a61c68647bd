package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/routerkit/router/runtime/discovery/dnstest"
	"github.com/routerkit/router/runtime/plan"
)

// fleet is a membership that records what it was told, in order, and keeps the set of
// engines with their state, as the server's does.
type fleet struct {
	mu      sync.Mutex
	log     []string
	engines map[string]plan.Engine
	drained map[string]bool
	failAdd error
}

func newFleet() *fleet {
	return &fleet{engines: map[string]plan.Engine{}, drained: map[string]bool{}}
}

func (f *fleet) Add(e plan.Engine) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAdd != nil {
		return f.failAdd
	}
	if _, ok := f.engines[e.ID]; ok {
		return fmt.Errorf("engine %q already exists", e.ID)
	}
	f.engines[e.ID] = e
	f.log = append(f.log, "add "+e.ID)
	return nil
}

func (f *fleet) Drain(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.engines[id]; !ok {
		return fmt.Errorf("engine %q: %w", id, ErrUnknownEngine)
	}
	f.drained[id] = true
	f.log = append(f.log, "drain "+id)
	return nil
}

func (f *fleet) Remove(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.drained[id] {
		return fmt.Errorf("engine %q removed without draining", id)
	}
	delete(f.engines, id)
	delete(f.drained, id)
	f.log = append(f.log, "remove "+id)
	return nil
}

// take returns the calls since the last take.
func (f *fleet) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.log
	f.log = nil
	return out
}

type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	after chan time.Time
	asked chan time.Duration
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), after: make(chan time.Time), asked: make(chan time.Duration, 16)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.asked <- d
	return c.after
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const drainFor = 30 * time.Second

type harness struct {
	dns   *dnstest.Server
	fleet *fleet
	clock *fakeClock
	d     *Discovery
}

func setup(t *testing.T, srcs ...plan.DNSSource) *harness {
	t.Helper()
	srv, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	h := &harness{dns: srv, fleet: newFleet(), clock: newClock()}
	for i := range srcs {
		srcs[i].Resolver = srv.Addr()
	}
	h.d = New(srcs, h.fleet, Options{DrainFor: drainFor, Clock: h.clock, Jitter: func() float64 { return 0.5 }})
	return h
}

func src(id string, mod func(*plan.DNSSource)) plan.DNSSource {
	s := plan.DNSSource{ID: id, Name: id + ".test.", Port: 8000, Scheme: "http", Model: "m", Role: plan.RolePlain,
		Engine:       plan.Engine{Kind: plan.KindSGLang, Model: "m", Role: plan.RolePlain, DPSize: 1, Load: plan.LoadSource{Source: "loads", IntervalMS: 500, StaleAfterMS: 2000}},
		IntervalSecs: 10, TimeoutMS: 2000, MaxEngines: 64, EmptyGrace: 2}
	if mod != nil {
		mod(&s)
	}
	return s
}

func (h *harness) step(t *testing.T, want ...string) {
	t.Helper()
	h.d.Step(context.Background())
	if got := h.fleet.take(); !slices.Equal(got, want) {
		t.Fatalf("membership calls:\n got %q\nwant %q", got, want)
	}
}

func TestARecordsAppearAndDisappear(t *testing.T) {
	h := setup(t, src("pods", nil))
	h.dns.SetAddrs("pods.test", "10.0.0.2", "10.0.0.1")
	h.step(t, "add pods:10.0.0.1:8000", "add pods:10.0.0.2:8000")
	e := h.fleet.engines["pods:10.0.0.1:8000"]
	if e.URL != "http://10.0.0.1:8000" || e.Model != "m" || e.Role != plan.RolePlain || e.Load.Source != "loads" {
		t.Errorf("discovered engine: %+v", e)
	}
	h.step(t) // nothing changed, nothing done

	h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2", "10.0.0.3")
	h.step(t, "add pods:10.0.0.3:8000")

	// 10.0.0.1 goes: drained at once, removed only after the drain period.
	h.dns.SetAddrs("pods.test", "10.0.0.2", "10.0.0.3")
	h.step(t, "drain pods:10.0.0.1:8000")
	st := h.d.Status()[0]
	if !slices.Equal(st.Engines, []string{"pods:10.0.0.2:8000", "pods:10.0.0.3:8000"}) || !slices.Equal(st.Draining, []string{"pods:10.0.0.1:8000"}) {
		t.Errorf("status while draining: %+v", st)
	}
	h.clock.advance(drainFor - time.Second)
	h.step(t)
	h.clock.advance(time.Second)
	h.step(t, "remove pods:10.0.0.1:8000")
	st = h.d.Status()[0]
	if len(st.Draining) != 0 || st.Lookups.OK != 6 || st.LastError != "" || st.Name != "A/AAAA pods.test.:8000" {
		t.Errorf("status after removal: %+v", st)
	}
}

func TestAAAARecords(t *testing.T) {
	h := setup(t, src("v6", func(s *plan.DNSSource) {
		s.Engine.KVEvents = &plan.KVEvents{Mode: plan.KVConnect, Endpoint: "tcp://{host}:5557", Topic: "kv@{host}", ReplayEndpoint: "tcp://{host}:5558"}
	}))
	h.dns.SetAddrs("v6.test", "fd00::1", "10.0.0.1")
	h.step(t, "add v6:10.0.0.1:8000", "add v6:fd00::1:8000")
	e := h.fleet.engines["v6:fd00::1:8000"]
	if e.URL != "http://[fd00::1]:8000" {
		t.Errorf("IPv6 url: %q", e.URL)
	}
	if kv := e.KVEvents; kv.Endpoint != "tcp://[fd00::1]:5557" || kv.ReplayEndpoint != "tcp://[fd00::1]:5558" || kv.Topic != "kv@fd00::1" {
		t.Errorf("kv events: %+v", kv)
	}
	if kv := h.fleet.engines["v6:10.0.0.1:8000"].KVEvents; kv.Endpoint != "tcp://10.0.0.1:5557" {
		t.Errorf("IPv4 kv endpoint: %+v", kv)
	}
}

func TestSRVRecords(t *testing.T) {
	h := setup(t, src("decode", func(s *plan.DNSSource) {
		s.Name, s.Port, s.SRV, s.Scheme = "", 0, "_http._tcp.decode.test.", "https"
	}))
	h.dns.SetSRV("_http._tcp.decode.test", dnstest.SRV{Target: "pod-0.decode.test", Port: 9001}, dnstest.SRV{Target: "pod-1.decode.test", Port: 9002})
	h.dns.SetAddrs("pod-0.decode.test", "10.1.0.1")
	h.dns.SetAddrs("pod-1.decode.test", "10.1.0.2")
	h.step(t, "add decode:10.1.0.1:9001", "add decode:10.1.0.2:9002")
	if u := h.fleet.engines["decode:10.1.0.2:9002"].URL; u != "https://10.1.0.2:9002" {
		t.Errorf("srv url: %q", u)
	}
	// A pod replaced: its new address is a new engine, the old one drains.
	h.dns.SetAddrs("pod-1.decode.test", "10.1.0.3")
	h.step(t, "drain decode:10.1.0.2:9002", "add decode:10.1.0.3:9002")
	// A target whose name has no address yet is skipped, not a failure.
	h.dns.SetSRV("_http._tcp.decode.test", dnstest.SRV{Target: "pod-0.decode.test", Port: 9001}, dnstest.SRV{Target: "pod-1.decode.test", Port: 9002}, dnstest.SRV{Target: "pod-2.decode.test", Port: 9003})
	h.step(t)
	if st := h.d.Status()[0]; st.Name != "SRV _http._tcp.decode.test." || st.LastError != "" {
		t.Errorf("status: %+v", st)
	}
}

func TestFailedLookupKeepsTheSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*dnstest.Server, string)
		want string
	}{
		{"servfail", (*dnstest.Server).ServFail, "server misbehaving"},
		{"timeout", (*dnstest.Server).Silence, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := setup(t, src("pods", func(s *plan.DNSSource) { s.TimeoutMS = 200 }))
			h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2")
			h.step(t, "add pods:10.0.0.1:8000", "add pods:10.0.0.2:8000")
			tc.fail(h.dns, "pods.test")
			for range 3 {
				h.clock.advance(drainFor)
				h.step(t) // nothing drained, nothing removed
			}
			st := h.d.Status()[0]
			if st.Failures != 3 || st.Lookups.Failed != 3 || !strings.Contains(st.LastError, tc.want) || len(st.Engines) != 2 {
				t.Errorf("status after failures: %+v", st)
			}
			// Back: the set is applied again and the failure count resets.
			h.dns.Answer("pods.test")
			h.dns.SetAddrs("pods.test", "10.0.0.1")
			h.step(t, "drain pods:10.0.0.2:8000")
			if st := h.d.Status()[0]; st.Failures != 0 || st.LastError != "" || !st.LastSuccess.Equal(h.clock.Now()) {
				t.Errorf("status after recovery: %+v", st)
			}
		})
	}
}

// Removal of an engine already draining goes on while lookups fail: it was leaving.
func TestDrainingEngineIsRemovedDuringFailures(t *testing.T) {
	h := setup(t, src("pods", nil))
	h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2")
	h.step(t, "add pods:10.0.0.1:8000", "add pods:10.0.0.2:8000")
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t, "drain pods:10.0.0.2:8000")
	h.dns.ServFail("pods.test")
	h.clock.advance(drainFor)
	h.step(t, "remove pods:10.0.0.2:8000")
}

func TestEmptyAnswerGrace(t *testing.T) {
	h := setup(t, src("pods", nil)) // grace 2
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t, "add pods:10.0.0.1:8000")
	h.dns.Delete("pods.test") // NXDOMAIN
	h.step(t)
	if st := h.d.Status()[0]; !strings.Contains(st.LastError, "1 of 2 answers") || st.Lookups.Empty != 1 || len(st.Engines) != 1 {
		t.Errorf("status in grace: %+v", st)
	}
	h.dns.SetAddrs("pods.test") // exists, no records: the same as NXDOMAIN
	h.step(t)
	h.step(t, "drain pods:10.0.0.1:8000")
	h.clock.advance(drainFor)
	h.step(t, "remove pods:10.0.0.1:8000")
	// An answer resets the count.
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t, "add pods:10.0.0.1:8000")
	h.dns.Delete("pods.test")
	h.step(t)
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t)
	h.dns.Delete("pods.test")
	h.step(t)
	h.step(t)
	h.step(t, "drain pods:10.0.0.1:8000")
}

func TestMaxEngines(t *testing.T) {
	h := setup(t, src("pods", func(s *plan.DNSSource) { s.MaxEngines = 2 }))
	h.dns.SetAddrs("pods.test", "10.0.0.3", "10.0.0.2", "10.0.0.1")
	h.step(t, "add pods:10.0.0.1:8000", "add pods:10.0.0.2:8000")
	st := h.d.Status()[0]
	if st.LeftOut != 1 || !strings.Contains(st.LastError, "3 addresses, more than max_engines (2): 1 left out; raise max_engines") {
		t.Errorf("status over the bound: %+v", st)
	}
	// A serving engine is kept over a lower address that appears.
	h.dns.SetAddrs("pods.test", "10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.3")
	h.step(t)
	// When one leaves, a left-out one takes its place.
	h.dns.SetAddrs("pods.test", "10.0.0.2", "10.0.0.3")
	h.step(t, "drain pods:10.0.0.1:8000", "add pods:10.0.0.3:8000")
	if st := h.d.Status()[0]; st.LeftOut != 0 || st.LastError != "" {
		t.Errorf("status back under the bound: %+v", st)
	}
}

func TestAddFailureIsRetried(t *testing.T) {
	h := setup(t, src("pods", nil))
	h.fleet.failAdd = errors.New("engine url already served")
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t)
	if st := h.d.Status()[0]; st.AddFailures != 1 || len(st.Engines) != 0 {
		t.Errorf("status after a refused add: %+v", st)
	}
	h.fleet.failAdd = nil
	h.step(t, "add pods:10.0.0.1:8000")
}

// An engine that comes back while draining stays draining until its drain period ends,
// then is removed and added again fresh in the same round.
func TestReturnWhileDraining(t *testing.T) {
	h := setup(t, src("pods", nil))
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t, "add pods:10.0.0.1:8000")
	h.dns.SetAddrs("pods.test", "10.0.0.2")
	h.step(t, "drain pods:10.0.0.1:8000", "add pods:10.0.0.2:8000")
	h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2")
	h.step(t)
	h.clock.advance(drainFor)
	h.step(t, "remove pods:10.0.0.1:8000", "add pods:10.0.0.1:8000")
}

// Start resolves once before returning, then again each time the interval passes, and
// stops with its context.
func TestStartAndInterval(t *testing.T) {
	h := setup(t, src("pods", nil))
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	ctx, cancel := context.WithCancel(context.Background())
	wait := h.d.Start(ctx)
	if got := h.fleet.take(); !slices.Equal(got, []string{"add pods:10.0.0.1:8000"}) {
		t.Fatalf("after Start: %q", got)
	}
	if d := <-h.clock.asked; d != 10*time.Second {
		t.Errorf("interval with jitter 0.5: %v, want 10s", d)
	}
	h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2")
	h.clock.after <- h.clock.Now()
	<-h.clock.asked // the round is done when the next wait starts
	if got := h.fleet.take(); !slices.Equal(got, []string{"add pods:10.0.0.2:8000"}) {
		t.Fatalf("after one interval: %q", got)
	}
	cancel()
	wait()
}

func TestJitterBounds(t *testing.T) {
	for _, j := range []struct {
		r    float64
		want time.Duration
	}{{0, 9 * time.Second}, {0.5, 10 * time.Second}, {0.9999999999, 11 * time.Second}} {
		d := New([]plan.DNSSource{src("pods", nil)}, newFleet(), Options{Jitter: func() float64 { return j.r }})
		if got := d.interval(d.sources[0]); got.Round(time.Millisecond) != j.want {
			t.Errorf("jitter %v: interval %v, want %v", j.r, got, j.want)
		}
	}
}

func TestEngineID(t *testing.T) {
	for a, want := range map[string]string{"10.0.0.1:80": "s:10.0.0.1:80", "[fd00::1]:8000": "s:fd00::1:8000"} {
		if got := EngineID("s", netip.MustParseAddrPort(a)); got != want {
			t.Errorf("EngineID(%s) = %q, want %q", a, got, want)
		}
	}
	if got := Engine(src("s", nil), netip.MustParseAddrPort("10.0.0.1:80")); !reflect.DeepEqual(got.ID, "s:10.0.0.1:80") || got.KVEvents != nil {
		t.Errorf("engine without kv events: %+v", got)
	}
}

func TestCollector(t *testing.T) {
	h := setup(t, src("pods", func(s *plan.DNSSource) { s.TimeoutMS = 200 }))
	h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2")
	h.step(t, "add pods:10.0.0.1:8000", "add pods:10.0.0.2:8000")
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t, "drain pods:10.0.0.2:8000")
	h.dns.ServFail("pods.test")
	h.step(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(h.d.Collector())
	want := `
# HELP router_dns_engines Engines a DNS source has in service, by state: serving or draining.
# TYPE router_dns_engines gauge
router_dns_engines{source="pods",state="draining"} 1
router_dns_engines{source="pods",state="serving"} 1
# HELP router_dns_lookups_total DNS discovery resolutions by source and result: ok, empty (no such name or no records) or failed (the set was kept).
# TYPE router_dns_lookups_total counter
router_dns_lookups_total{result="empty",source="pods"} 0
router_dns_lookups_total{result="failed",source="pods"} 1
router_dns_lookups_total{result="ok",source="pods"} 2
# HELP router_dns_consecutive_failures Consecutive failed lookups of a source; its last set stays meanwhile.
# TYPE router_dns_consecutive_failures gauge
router_dns_consecutive_failures{source="pods"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "router_dns_engines", "router_dns_lookups_total", "router_dns_consecutive_failures"); err != nil {
		t.Error(err)
	}
}

// With no drain period, a departed engine drains for one round and goes at the next.
func TestRemovalWaitsForTheNextRound(t *testing.T) {
	h := setup(t, src("pods", nil))
	h.d.opts.DrainFor = 0
	h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2")
	h.step(t, "add pods:10.0.0.1:8000", "add pods:10.0.0.2:8000")
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t, "drain pods:10.0.0.2:8000")
	h.step(t, "remove pods:10.0.0.2:8000")
}

// An engine removed behind the source's back (an admin, a reload) is forgotten, not
// retried forever.
func TestEngineGoneElsewhere(t *testing.T) {
	h := setup(t, src("pods", nil))
	h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2")
	h.step(t, "add pods:10.0.0.1:8000", "add pods:10.0.0.2:8000")
	h.fleet.mu.Lock()
	delete(h.fleet.engines, "pods:10.0.0.2:8000")
	h.fleet.mu.Unlock()
	h.dns.SetAddrs("pods.test", "10.0.0.1")
	h.step(t)
	if st := h.d.Status()[0]; !slices.Equal(st.Engines, []string{"pods:10.0.0.1:8000"}) || len(st.Draining) != 0 {
		t.Errorf("status: %+v", st)
	}
	// Listed again, it is added again.
	h.dns.SetAddrs("pods.test", "10.0.0.1", "10.0.0.2")
	h.step(t, "add pods:10.0.0.2:8000")
}

// SRV targets are taken in name order, at most twice max_engines of them.
func TestSRVTargetsBounded(t *testing.T) {
	h := setup(t, src("d", func(s *plan.DNSSource) { s.Name, s.Port, s.SRV, s.MaxEngines = "", 0, "_x._tcp.d.test.", 1 }))
	h.dns.SetSRV("_x._tcp.d.test", dnstest.SRV{Target: "c.d.test", Port: 3}, dnstest.SRV{Target: "b.d.test", Port: 2}, dnstest.SRV{Target: "a.d.test", Port: 1})
	for _, n := range []string{"a", "b", "c"} {
		h.dns.SetAddrs(n+".d.test", "10.0.0.1")
	}
	before := h.dns.Queries()
	h.step(t, "add d:10.0.0.1:1")
	// One SRV question, then A and AAAA for a and b only.
	if q := h.dns.Queries() - before; q != 5 {
		t.Errorf("%d questions, want 5", q)
	}
	if st := h.d.Status()[0]; st.LeftOut != 1 {
		t.Errorf("status: %+v", st)
	}
}

// Adopt takes over exactly the engines a source's template makes.
func TestAdopt(t *testing.T) {
	s := src("pods", nil)
	d := New([]plan.DNSSource{s}, newFleet(), Options{})
	e := Engine(s, netip.MustParseAddrPort("10.0.0.1:8000"))
	other := e
	other.DPSize = 2
	stranger := Engine(src("other", nil), netip.MustParseAddrPort("10.0.0.1:8000"))
	if !d.Adopt(e) || d.Adopt(other) || d.Adopt(stranger) {
		t.Fatal("Adopt must take the template's engine and refuse a changed or foreign one")
	}
	if st := d.Status()[0]; !slices.Equal(st.Engines, []string{e.ID}) {
		t.Errorf("status after Adopt: %+v", st)
	}
}
