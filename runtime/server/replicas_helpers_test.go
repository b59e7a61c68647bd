package server

import (
	"encoding/json"
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
	return startReplicasWith(t, p, n, plan.Bindings{Store: plan.BindingsRedis, Address: addr, KeyPrefix: "replicas:", TimeoutMS: 500, RetryMS: 50})
}

// startReplicasWith is startReplicas with the routers' binding store settings.
func startReplicasWith(t *testing.T, p *plan.Plan, n int, b plan.Bindings) *replicaSet {
	t.Helper()
	p.Bindings = &b
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
func serveReplica(t *testing.T, p *plan.Plan) *fleetCase { return serveRouter(t, p, Options{}) }

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
func bindingsStatus(t *testing.T, fc *fleetCase) affinity.Status { return fc.state(t).Bindings }
