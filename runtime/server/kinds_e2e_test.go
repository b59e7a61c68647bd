package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// TestMixedFleetCacheAwareOverEveryEncodingAndMode runs SGLang and vLLM engines behind
// `router serve` with every KV-event encoding (SGLang array, vLLM array, vLLM map) in
// both modes (the router dials the engine, or the engine dials the router). Each engine
// caches a prompt nobody else has; the router's index learns it over real ZMQ, and
// cache_aware then sends the same prompt to that engine.
func TestMixedFleetCacheAwareOverEveryEncodingAndMode(t *testing.T) {
	type variant struct {
		kind     plan.Kind
		encoding string
		mode     string
	}
	var variants []variant
	for _, mode := range []string{plan.KVConnect, plan.KVBind} {
		variants = append(variants,
			variant{plan.KindSGLang, plan.EncodingSGLangArray, mode},
			variant{plan.KindVLLM, plan.EncodingVLLMArray, mode},
			variant{plan.KindVLLM, plan.EncodingVLLMMap, mode})
	}
	bindPort := freePort(t)
	p := &plan.Plan{Health: plan.Health{IntervalMS: 1000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 1}, ShutdownGraceSecs: 5}
	for i, v := range variants {
		id := fmt.Sprintf("%s-%s-%s", v.kind, strings.ReplaceAll(v.encoding, "_", "-"), v.mode)
		source := "loads"
		if v.kind == plan.KindVLLM {
			source = "metrics"
		}
		kv := &plan.KVEvents{Mode: v.mode, Topic: "kv@" + id + "@m", Encoding: v.encoding, MaxBlocks: 1 << 16}
		if v.mode == plan.KVBind {
			kv.Endpoint = "tcp://127.0.0.1:" + strconv.Itoa(bindPort) // one endpoint, told apart by topic
		}
		p.Engines = append(p.Engines, plan.Engine{Kind: v.kind, ID: id, Model: "m", Role: plan.RolePlain, DPSize: 1,
			URL: "http://127.0.0.1:" + strconv.Itoa(40000+i), Load: plan.LoadSource{Source: source, IntervalMS: 200, StaleAfterMS: 2000}, KVEvents: kv})
	}
	p.Models = []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &plan.Group{Policy: plan.Policy{
		Type: plan.CacheAware, MinMatchedTokens: new(int64(32)), CandidateMinWorkers: 8, CandidateRatio: 0.05, CandidateMaxWorkers: 32,
		SwitchMarginTokens: new(int64(0)), MinLoadChoices: 2}}}}}}}
	cfg := sim.DefaultConfig()
	cfg.TimeScale = 0
	kf := startKindsFleet(t, p, cfg)

	for _, e := range p.Engines {
		blocks := fmt.Sprintf("router_kv_blocks{engine=%q}", e.ID)
		// ZMQ's slow joiner: warm up with fresh prompts until the index holds blocks of the
		// engine, so the subscription (or the publisher's connection) is up.
		i := 0
		wait.For(t, e.ID+"'s KV events in the router's index", func() bool {
			if kf.metric(t, blocks) > 0 {
				return true
			}
			chat(t, e.URL, prompt(fmt.Sprintf("%s warm-up %d", e.ID, i)), 1)
			i++
			return false
		})
		before := kf.metric(t, blocks)
		if code := chat(t, e.URL, prompt(e.ID), 1); code != http.StatusOK {
			t.Fatalf("%s: direct request: %d", e.ID, code)
		}
		wait.For(t, e.ID+"'s new blocks in the router's index", func() bool { return kf.metric(t, blocks) > before })
		if code := chat(t, kf.url, prompt(e.ID), 1); code != http.StatusOK {
			t.Fatalf("%s: routed request: %d", e.ID, code)
		}
		if got := kf.byHost[kf.routed.last()]; got != e.ID {
			t.Errorf("the prompt %s cached went to %s", e.ID, got)
		}
	}
	if v := kf.metric(t, "router_kv_event_unknown_topic_total"); v != 0 {
		t.Errorf("unknown topics = %v", v)
	}
}

// TestVLLMLoadFromMetrics runs vLLM engines, which have no /v1/loads, behind `router
// serve` with the vLLM kind's default load source, /metrics: requests the router did not
// send (so its in-flight counts cannot see them) make load_based avoid the busy engine,
// and max_running_requests rejects once every engine reports the cap.
func TestVLLMLoadFromMetrics(t *testing.T) {
	p := &plan.Plan{Health: plan.Health{IntervalMS: 1000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 1}, ShutdownGraceSecs: 5}
	for i, id := range []string{"V1", "V2"} {
		p.Engines = append(p.Engines, plan.Engine{Kind: plan.KindVLLM, ID: id, Model: "m", Role: plan.RolePlain, DPSize: 1,
			URL: "http://127.0.0.1:" + strconv.Itoa(41000+i), Load: plan.LoadSource{Source: "metrics", IntervalMS: 100, StaleAfterMS: 2000}})
	}
	p.Models = []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &plan.Group{Policy: plan.Policy{
		Type: plan.LoadBased, Admission: plan.Admission{MaxRunningRequests: 8}}}}}}}}
	cfg := sim.DefaultConfig()
	cfg.DecodePerToken = 200 * time.Millisecond // a 64-token answer runs for 12.8 s
	kf := startKindsFleet(t, p, cfg)

	busy := func(engine string, n int) {
		for range n {
			go func() {
				resp, err := http.Post(p.Engines[map[string]int{"V1": 0, "V2": 1}[engine]].URL+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"keep busy"}]}`))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
	}
	running := func(want map[string]int64) func() bool {
		return func() bool {
			st := kf.state(t)
			for id, n := range want {
				l := st[id].Load
				if l == nil || l.Running != n || !l.KVKnown {
					return false
				}
			}
			return true
		}
	}

	// V1 runs six requests; V2's short ones, finished or just reported, never add up to that.
	busy("V1", 6)
	wait.For(t, "V1's running requests reported through /metrics", running(map[string]int64{"V1": 6, "V2": 0}))
	for i := range 4 {
		if code := chat(t, kf.url, fmt.Sprintf("short %d", i), 1); code != http.StatusOK {
			t.Fatalf("routed request %d: %d", i, code)
		}
		if got := kf.byHost[kf.routed.last()]; got != "V2" {
			t.Fatalf("request %d went to %s, the engine /metrics reports busy", i, got)
		}
	}

	busy("V1", 2)
	busy("V2", 8)
	wait.For(t, "both engines at the running cap", running(map[string]int64{"V1": 8, "V2": 8}))
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 1, "messages": []map[string]string{{"role": "user", "content": "rejected"}}})
	resp, err := http.Post(kf.url+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(msg), "engine V1 rejected by admission: reported running requests is 8, cap 8") {
		t.Fatalf("at the cap: %d %s; want 503 with V1 rejected at the running cap", resp.StatusCode, msg)
	}
}

// TestKVEventGapRefilledFromTheReplaySocket loses one KV-event batch of a vLLM engine on
// the wire (the simulator keeps it for replay, as vLLM's publisher does); the next batch
// reveals the gap, the router asks the engine's replay socket for the lost one, and the
// prefix that only the lost batch announced is then routed to its holder.
func TestKVEventGapRefilledFromTheReplaySocket(t *testing.T) {
	p := &plan.Plan{Health: plan.Health{IntervalMS: 1000, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 1}, ShutdownGraceSecs: 5}
	for i, id := range []string{"V1", "V2", "V3"} {
		p.Engines = append(p.Engines, plan.Engine{Kind: plan.KindVLLM, ID: id, Model: "m", Role: plan.RolePlain, DPSize: 1,
			URL:  "http://127.0.0.1:" + strconv.Itoa(42000+i),
			Load: plan.LoadSource{Source: "metrics", IntervalMS: 200, StaleAfterMS: 2000},
			KVEvents: &plan.KVEvents{Mode: plan.KVConnect, Topic: "kv@" + id + "@m", Encoding: plan.EncodingVLLMMap,
				ReplayEndpoint: "tcp://127.0.0.1:0", MaxBlocks: 1 << 16}})
	}
	p.Models = []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &plan.Group{Policy: plan.Policy{
		Type: plan.CacheAware, MinMatchedTokens: new(int64(32)), CandidateMinWorkers: 8, CandidateRatio: 0.05, CandidateMaxWorkers: 32,
		SwitchMarginTokens: new(int64(0)), MinLoadChoices: 2}}}}}}}
	cfg := sim.DefaultConfig()
	cfg.TimeScale = 0
	kf := startKindsFleet(t, p, cfg)
	v1 := p.Engines[0]
	blocks := `router_kv_blocks{engine="V1"}`
	i := 0
	wait.For(t, "V1's KV events in the router's index", func() bool {
		if kf.metric(t, blocks) > 0 {
			return true
		}
		chat(t, v1.URL, prompt(fmt.Sprintf("V1 warm-up %d", i)), 1)
		i++
		return false
	})

	se := kf.fleet.Engine("V1")
	if err := se.SetFaults(sim.Faults{DropKVEvents: true}); err != nil {
		t.Fatal(err)
	}
	if code := chat(t, v1.URL, prompt("lost"), 1); code != http.StatusOK {
		t.Fatalf("direct request: %d", code)
	}
	if err := se.SetFaults(sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	chat(t, v1.URL, prompt("after the loss"), 1)
	refilled := `router_kv_event_replays_total{engine="V1",result="refilled"}`
	wait.For(t, "the gap refilled", func() bool { return kf.metric(t, refilled) == 1 })
	if v := kf.metric(t, `router_kv_event_gaps_total{engine="V1"}`); v != 1 {
		t.Fatalf("gaps = %v, want 1", v)
	}
	if code := chat(t, kf.url, prompt("lost"), 1); code != http.StatusOK {
		t.Fatalf("routed request: %d", code)
	}
	if got := kf.byHost[kf.routed.last()]; got != "V1" {
		t.Errorf("the prefix announced only by the replayed batch went to %s", got)
	}
}
