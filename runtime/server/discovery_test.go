package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/discovery/dnstest"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// dnsFleet is three simulated engines that a loopback DNS server lists by SRV records
// (all on 127.0.0.1, told apart by port) and a router whose only engines come from it.
type dnsFleet struct {
	*fleetCase
	dns   *dnstest.Server
	sims  *sim.Fleet
	ports []uint16
}

const dnsSRV = "_http._tcp.pods.test."

func startDNSFleet(t *testing.T, listed ...int) *dnsFleet {
	t.Helper()
	sims := startSims(t, testPlan([]plan.Engine{plainEngine("S0"), plainEngine("S1"), plainEngine("S2")}), 0.01)
	srv, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	df := &dnsFleet{dns: srv, sims: sims}
	for _, e := range sims.Engines() {
		u, _ := url.Parse(e.URL())
		_, port, _ := net.SplitHostPort(u.Host)
		n, _ := strconv.Atoi(port)
		df.ports = append(df.ports, uint16(n))
	}
	for i := range df.ports {
		srv.SetAddrs("e"+strconv.Itoa(i)+".pods.test", "127.0.0.1")
	}
	df.list(listed...)

	p := testPlan(nil, plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all",
		Groups: plan.Groups{Plain: &plan.Group{Policy: plan.Policy{Type: plan.RoundRobin}}}}}})
	tmpl := plainEngine("")
	tmpl.ID, tmpl.URL = "", ""
	p.EnginesFromDNS = []plan.DNSSource{{ID: "pods", SRV: dnsSRV, Scheme: "http", Model: "m", Role: plan.RolePlain,
		Engine: tmpl, IntervalSecs: 1, TimeoutMS: 1000, Resolver: srv.Addr(), MaxEngines: 8, EmptyGrace: 1}}
	df.fleetCase = serveRouter(t, p, Options{})
	return df
}

// list makes the SRV name list the engines with these indexes.
func (df *dnsFleet) list(idx ...int) {
	srvs := make([]dnstest.SRV, len(idx))
	for i, n := range idx {
		srvs[i] = dnstest.SRV{Target: "e" + strconv.Itoa(n) + ".pods.test", Port: df.ports[n]}
	}
	df.dns.SetSRV(dnsSRV, srvs...)
}

func (df *dnsFleet) id(n int) string { return "pods:127.0.0.1:" + strconv.Itoa(int(df.ports[n])) }

func (df *dnsFleet) url(n int) string { return "http://127.0.0.1:" + strconv.Itoa(int(df.ports[n])) }

// engineStates maps engine id to its state in /admin/state.
func (df *dnsFleet) engineStates(t *testing.T) (map[string]control.EngineState, *snapshot) {
	t.Helper()
	st := df.state(t)
	out := map[string]control.EngineState{}
	for _, e := range st.Engines {
		out[e.ID] = e
	}
	return out, st
}

// Traffic reaches an engine the name starts listing and stops going to one it no longer
// lists, while requests run all along and none fails.
func TestDNSDiscoveryEndToEnd(t *testing.T) {
	df := startDNSFleet(t, 0, 1)
	states, st := df.engineStates(t)
	if len(states) != 2 || states[df.id(0)].Origin != control.OriginDNS || states[df.id(1)].State != "serving" {
		t.Fatalf("engines at start: %+v", states)
	}
	if len(st.DNS) != 1 || st.DNS[0].ID != "pods" || len(st.DNS[0].Engines) != 2 || st.DNS[0].Lookups.OK < 1 {
		t.Fatalf("dns status at start: %+v", st.DNS)
	}

	// Clients send requests all along.
	ctx, stop := context.WithCancel(context.Background())
	var sent, failed atomic.Int64
	var clients sync.WaitGroup
	for range 4 {
		clients.Go(func() {
			for ctx.Err() == nil {
				code, _, body := df.post(t, `{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`)
				sent.Add(1)
				if code != http.StatusOK {
					failed.Add(1)
					t.Errorf("request failed: %d %s", code, body)
				}
			}
		})
	}
	defer func() { stop(); clients.Wait() }()

	// A new engine appears and gets traffic.
	df.list(0, 1, 2)
	wait.For(t, "the new engine picked", func() bool { return len(df.sent.bodies(df.url(2))) > 0 })

	// An engine leaves: drained, then removed, then forgotten once its requests are
	// done; no request reaches it after that.
	df.list(1, 2)
	wait.For(t, "engine 0 draining", func() bool {
		s, _ := df.engineStates(t)
		return s[df.id(0)].State == "draining"
	})
	wait.For(t, "engine 0 forgotten", func() bool {
		s, _ := df.engineStates(t)
		_, ok := s[df.id(0)]
		return !ok
	})
	afterRemoval := len(df.sent.bodies(df.url(0)))
	before := sent.Load()
	wait.For(t, "more requests after the removal", func() bool { return sent.Load() > before+20 })
	if n := len(df.sent.bodies(df.url(0))); n != afterRemoval {
		t.Errorf("engine 0 got %d requests after its removal", n-afterRemoval)
	}
	if len(df.sent.bodies(df.url(1))) == 0 || len(df.sent.bodies(df.url(2))) == 0 {
		t.Errorf("the remaining engines must share the traffic")
	}
	stop()
	clients.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed", failed.Load(), sent.Load())
	}
}

// A failing DNS server keeps the engines; the failure shows in /admin/state and metrics.
func TestDNSDiscoveryFailureKeepsEngines(t *testing.T) {
	df := startDNSFleet(t, 0, 1)
	df.dns.ServFail(dnsSRV)
	wait.For(t, "a failed lookup reported", func() bool {
		_, st := df.engineStates(t)
		return st.DNS[0].Failures >= 2
	})
	states, st := df.engineStates(t)
	if len(states) != 2 || st.DNS[0].LastError == "" || len(st.DNS[0].Engines) != 2 {
		t.Fatalf("after failures: engines %+v, dns %+v", states, st.DNS)
	}
	if code, _, body := df.post(t, `{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}`); code != http.StatusOK {
		t.Fatalf("request during the DNS outage: %d %s", code, body)
	}
	resp, err := http.Get(df.fleetCase.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`router_dns_lookups_total{result="failed",source="pods"}`, `router_dns_engines{source="pods",state="serving"} 2`, `router_engines{origin="dns",state="serving"} 2`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// A reload that removes the source removes its engines; one that keeps it keeps them.
func TestDNSDiscoveryFollowsReload(t *testing.T) {
	df := startDNSFleet(t, 0, 1)
	same := *df.srv.current().plan
	same.Engines = nil
	if _, err := df.srv.Reload(&same); err != nil {
		t.Fatal(err)
	}
	if states, _ := df.engineStates(t); len(states) != 2 {
		t.Fatalf("a reload with the same source must keep its engines: %+v", states)
	}
	// Changed sources restart discovery, which takes over the engines its template
	// still makes instead of replacing them.
	slower := same
	slower.EnginesFromDNS = []plan.DNSSource{same.EnginesFromDNS[0]}
	slower.EnginesFromDNS[0].IntervalSecs = 2
	if _, err := df.srv.Reload(&slower); err != nil {
		t.Fatal(err)
	}
	states, st := df.engineStates(t)
	if len(states) != 2 || states[df.id(0)].State != "serving" || len(st.DNS) != 1 || len(st.DNS[0].Engines) != 2 {
		t.Fatalf("after a reload changing the interval: engines %+v, dns %+v", states, st.DNS)
	}
	if n := testutil.ToFloat64(df.srv.fleet.metrics.Changes.WithLabelValues("removed", control.OriginDNS)); n != 0 {
		t.Fatalf("a changed interval removed %v engines", n)
	}
	none := same
	none.EnginesFromDNS = nil
	none.Engines = []plan.Engine{plainEngine("S")}
	none.Engines[0].URL = df.url(2)
	if _, err := df.srv.Reload(&none); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the source's engines gone", func() bool {
		s, st := df.engineStates(t)
		return len(s) == 1 && s["S"].Origin == control.OriginConfig && st.DNS == nil
	})
}
