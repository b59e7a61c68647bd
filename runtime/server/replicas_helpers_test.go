package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity"
)

// replicaSet is several routers, each a real server on its own port of 127.0.0.1, over one
// simulated fleet and one binding store. routers[0] is the router startFleet started.
type replicaSet struct {
	routers []*fleetCase
}

// startReplicas starts the fleet of p and n routers over it, all with bindings in the
// Redis server at addr.
func startReplicas(t *testing.T, p *plan.Plan, n int, addr string) *replicaSet {
	t.Helper()
	p.Bindings = &plan.Bindings{Store: plan.BindingsRedis, Address: addr, KeyPrefix: "replicas:", TimeoutMS: 500, RetryMS: 50}
	first := startScaledFleet(t, p, 0)
	rs := &replicaSet{routers: []*fleetCase{first}}
	for range n - 1 {
		rs.routers = append(rs.routers, serveReplica(t, clonePlan(t, p)))
	}
	return rs
}

// clonePlan copies p, so that replicas share no plan memory, as separate processes do.
func clonePlan(t *testing.T, p *plan.Plan) *plan.Plan {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var c plan.Plan
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// serveReplica serves one more router of p, whose engines already run.
func serveReplica(t *testing.T, p *plan.Plan) *fleetCase {
	t.Helper()
	rec := &recordingTransport{next: http.DefaultTransport.(*http.Transport).Clone()}
	srv, err := New(p, Options{Transport: rec, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	fc := &fleetCase{srv: srv, url: "http://" + ln.Addr().String(), sent: rec, stop: cancel, served: make(chan error, 1)}
	go func() { fc.served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-fc.served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	waitFor(t, "replica ready", func() bool {
		resp, err := http.Get(fc.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return fc
}

// enginesOf returns how many requests each engine received, over every replica, whose
// body contains marker.
func (rs *replicaSet) enginesOf(p *plan.Plan, marker string) map[string]int {
	got := map[string]int{}
	for _, fc := range rs.routers {
		for _, e := range p.Engines {
			for _, b := range fc.sent.bodies(e.URL) {
				if strings.Contains(string(b), marker) {
					got[e.ID]++
				}
			}
		}
	}
	return got
}

// bindingsStatus is the binding store as a router's GET /admin/state reports it.
func bindingsStatus(t *testing.T, fc *fleetCase) affinity.Status {
	t.Helper()
	resp, err := http.Get(fc.url + "/admin/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Bindings
}
