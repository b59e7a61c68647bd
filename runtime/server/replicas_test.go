package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity/redistest"
)

// sessionPlan is three plain engines of model "m" under session_aware, which places new
// sessions by power-of-two: without a shared store, a conversation spread over replicas
// lands on several engines.
func sessionPlan() *plan.Plan {
	return testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2"), plainEngine("E3")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.SessionAware, plan.Admission{}))}},
	}})
}

// turn sends one turn of conversation conv to a router and fails the test on a non-200.
func turn(t *testing.T, fc *fleetCase, conv string, n int) {
	t.Helper()
	status, _, body := fc.post(t, chat("m", fmt.Sprintf("<%s> turn %d", conv, n), `, "max_tokens": 1`), "x-session-id", conv)
	if status != http.StatusOK {
		t.Fatalf("%s turn %d: %d %s", conv, n, status, body)
	}
}

// postTurn is turn for other goroutines than the test's: it returns the status, 0 when
// the request failed.
func postTurn(fc *fleetCase, conv string, n int) int {
	req, err := http.NewRequest(http.MethodPost, fc.url+"/v1/chat/completions",
		strings.NewReader(chat("m", fmt.Sprintf("<%s> turn %d", conv, n), `, "max_tokens": 1`)))
	if err != nil {
		return 0
	}
	req.Header.Set("x-session-id", conv)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// oneEngine checks that every turn of conv, over all replicas, went to a single engine,
// and returns it.
func oneEngine(t *testing.T, rs *replicaSet, p *plan.Plan, conv string, turns int) string {
	t.Helper()
	got := rs.enginesOf(p, "<"+conv+">")
	if len(got) != 1 {
		t.Fatalf("%s went to engines %v; want every turn on one engine", conv, got)
	}
	for id, n := range got {
		if n != turns {
			t.Fatalf("%s: %d turns on %s, sent %d", conv, n, id, turns)
		}
		return id
	}
	return ""
}

func TestReplicasShareSessionBindings(t *testing.T) {
	redis := redistest.Start(t)
	p := sessionPlan()
	rs := startReplicas(t, p, 3, redis.Addr())

	const convs, turns = 6, 9
	for c := range convs {
		conv := fmt.Sprintf("conv-%d", c)
		// The first turn reaches all three replicas at once: concurrent first bindings
		// on different replicas must converge on one engine.
		var wg sync.WaitGroup
		statuses := make([]int, len(rs.routers))
		for i, fc := range rs.routers {
			wg.Go(func() {
				statuses[i] = postTurn(fc, conv, i)
			})
		}
		wg.Wait()
		for i, s := range statuses {
			if s != http.StatusOK {
				t.Fatalf("%s first turn on replica %d: status %d", conv, i, s)
			}
		}
		for n := 3; n < turns; n++ {
			turn(t, rs.routers[(c+n)%3], conv, n)
		}
	}
	engines := map[string]bool{}
	for c := range convs {
		engines[oneEngine(t, rs, p, fmt.Sprintf("conv-%d", c), turns)] = true
	}
	t.Logf("%d conversations placed on engines %v", convs, engines)
	for i, fc := range rs.routers {
		if st := bindingsStatus(t, fc); st.Store != "redis" || !st.Up || st.Errors != 0 {
			t.Errorf("replica %d reports bindings %+v; want redis, up, no errors", i, st)
		}
	}
}

func TestReplicasKeepRoutingWhenStoreDies(t *testing.T) {
	redis := redistest.Start(t)
	p := sessionPlan()
	rs := startReplicas(t, p, 3, redis.Addr())

	const convs = 4
	sent := make([]int, convs)
	send := func(c, replica int) {
		turn(t, rs.routers[replica], fmt.Sprintf("conv-%d", c), sent[c])
		sent[c]++
	}
	for c := range convs {
		for r := range 3 {
			send(c, r)
		}
	}
	before := map[int]string{}
	for c := range convs {
		before[c] = oneEngine(t, rs, p, fmt.Sprintf("conv-%d", c), sent[c])
	}

	redis.Stop()
	// Every replica keeps answering; each routes a conversation it has seen with its
	// local copy of the binding, so the conversation stays on its engine.
	for c := range convs {
		for r := range 3 {
			send(c, r)
		}
	}
	for i, fc := range rs.routers {
		if st := bindingsStatus(t, fc); st.Up || st.LocalOps == 0 || st.LastError == "" {
			t.Errorf("replica %d reports bindings %+v while Redis is down; want down, local operations and the error", i, st)
		}
		if v := metricValue(t, fc, `router_bindings_store_up{store="redis"}`); v != "0" {
			t.Errorf("replica %d: router_bindings_store_up = %s while Redis is down, want 0", i, v)
		}
	}
	for c := range convs {
		if got := oneEngine(t, rs, p, fmt.Sprintf("conv-%d", c), sent[c]); got != before[c] {
			t.Errorf("conv-%d moved from %s to %s during the outage", c, before[c], got)
		}
	}

	// Redis comes back empty: the replicas find it, share again, and re-offer the
	// bindings they kept, so no conversation moves.
	redis.Restart()
	for i, fc := range rs.routers {
		wait.For(t, fmt.Sprintf("replica %d back on the store", i), func() bool { return bindingsStatus(t, fc).Up })
	}
	for c := range convs {
		for r := range 3 {
			send(c, (r+c)%3)
		}
	}
	fresh := fmt.Sprintf("conv-%d", convs)
	for r := range 3 {
		turn(t, rs.routers[r], fresh, r)
	}
	for c := range convs {
		if got := oneEngine(t, rs, p, fmt.Sprintf("conv-%d", c), sent[c]); got != before[c] {
			t.Errorf("conv-%d moved from %s to %s after the store came back", c, before[c], got)
		}
	}
	oneEngine(t, rs, p, fresh, 3)
}

// metricValue returns the value of one series in a router's /metrics, "" if absent.
func metricValue(t *testing.T, fc *fleetCase, series string) string {
	t.Helper()
	resp, err := http.Get(fc.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			return v
		}
	}
	return ""
}

// Sticky routing keys are shared like sessions: a key's requests, spread over the
// replicas, all reach the engine its random fallback chose first. (With round_robin each
// replica's cursor would move in step and hide unshared bindings.)
func TestReplicasShareStickyBindings(t *testing.T) {
	redis := redistest.Start(t)
	p := testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2"), plainEngine("E3")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(plan.Group{Policy: plan.Policy{Type: plan.Sticky, Fallback: plan.Random}})}},
	}})
	rs := startReplicas(t, p, 3, redis.Addr())
	const keys, requests = 3, 6
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		for n := range requests {
			fc := rs.routers[(k+n)%3]
			status, _, body := fc.post(t, chat("m", fmt.Sprintf("<%s> %d", key, n), `, "max_tokens": 1`), "x-sgl-routing-key", key)
			if status != http.StatusOK {
				t.Fatalf("%s request %d: %d %s", key, n, status, body)
			}
		}
	}
	for k := range keys {
		oneEngine(t, rs, p, fmt.Sprintf("key-%d", k), requests)
	}
}
