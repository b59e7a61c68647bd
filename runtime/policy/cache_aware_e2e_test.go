package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/sim"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/token"
)

// TestCacheAwareFollowsSimulatedKVEvents runs the cache path end to end: simulated engines
// publish KV events over ZMQ on 127.0.0.1, the router's subscriptions feed its prefix
// index, and once a request has filled one engine's cache, the index names that engine as
// the prefix holder and cache-aware selection sends the next request with the same prefix
// there.
func TestCacheAwareFollowsSimulatedKVEvents(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.TimeScale = 0.01
	var specs []sim.EngineSpec
	for _, id := range []string{"E1", "E2", "E3"} {
		specs = append(specs, sim.EngineSpec{ID: id, Model: "m", Config: cfg, KVEvents: &sim.KVEventsSpec{Endpoint: "tcp://127.0.0.1:0"}})
	}
	fleet, err := sim.Start(t.Context(), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })

	p := &plan.Plan{Models: []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "all",
		Groups: plan.Groups{Plain: &plan.Group{Policy: plan.Policy{Type: plan.CacheAware, MinMatchedTokens: new(int64(1024)),
			CandidateMinWorkers: 8, CandidateRatio: 0.05, CandidateMaxWorkers: 32, SwitchMarginTokens: new(int64(1024)), MinLoadChoices: 2}}}}}}}}
	for _, e := range fleet.Engines() {
		p.Engines = append(p.Engines, plan.Engine{ID: e.ID(), URL: e.URL(), Model: "m", Role: plan.RolePlain, DPSize: 1,
			KVEvents: &plan.KVEvents{Endpoint: e.KVEndpoints()[0], Topic: e.KVTopic()}}) // block size: the default, as the simulator's
	}
	deps, err := policy.NewDeps(p, load.NewTable(p.Engines, nil), policy.NewSeededRand(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := kv.Subscribe(ctx, p, deps.KV, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); sub.Wait() })
	reg, err := engine.FromPlan(p.Engines)
	if err != nil {
		t.Fatal(err)
	}
	resolver, err := bucket.NewResolver(p.Models[0], reg, deps)
	if err != nil {
		t.Fatal(err)
	}

	// ZMQ's slow joiner: a PUB socket drops events until the subscription reaches it. Send
	// each engine fresh prompts until the index shows one of them.
	// Each poll checks every prompt sent so far, so that events slower than a poll still count.
	for _, e := range fleet.Engines() {
		var sent [][]uint32
		wait.For(t, e.ID()+"'s KV events in the index", func() bool {
			for _, ids := range sent {
				if holders(deps.KV, ids)[e.ID()] > 0 {
					return true
				}
			}
			sent = append(sent, chat(t, e.URL(), fmt.Sprintf("warm up %s round %d: %s", e.ID(), len(sent), strings.Repeat("word ", 40))))
			return false
		})
	}

	// A long shared prefix fills E2's cache.
	prefix := strings.Repeat("The quick brown fox jumps over the lazy dog near the riverbank. ", 150)
	ids := chat(t, fleet.Engine("E2").URL(), prefix)
	want := len(ids) / kv.DefaultBlockSize
	wait.For(t, fmt.Sprintf("E2 holding the prompt's %d blocks in the index", want), func() bool {
		return holders(deps.KV, ids)["E2"] >= want
	})
	if h := holders(deps.KV, ids); len(h) != 1 {
		t.Fatalf("index holders of the prompt: %v, want E2 only", h)
	}

	// The next request with that prefix goes to E2, whatever the fallback would choose.
	next := token.EncodeChat([]token.Message{{Role: "user", Content: prefix + "And then what happened?"}})
	tr := &decision.Trace{}
	for range 5 {
		sel, err := resolver.Route(context.Background(), &policy.Facts{
			Model: "m", InputTokens: int64(len(next)), TokenIDs: next}, &policy.Pass{Trace: tr})
		if err != nil {
			t.Fatal(err)
		}
		if sel.Plain.Engine.ID() != "E2" || sel.Plain.Reason != "prefix holder with the least uncached work" {
			t.Fatalf("pick = %s (%s), want E2 as the prefix holder", sel.Plain.Engine.ID(), sel.Plain.Reason)
		}
	}
	g := tr.Attempts[0].Groups[0]
	if g.Prefix.Outcome != decision.PrefixHit || len(g.Prefix.Matches) != 1 || g.Prefix.Matches[0].Engine != "E2" ||
		g.Prefix.Matches[0].Tokens != int64(want*kv.DefaultBlockSize) {
		t.Fatalf("prefix record = %+v, want E2 holding %d tokens", g.Prefix, want*kv.DefaultBlockSize)
	}

	// Once E2 drops its cache, the index forgets and the policy falls back to load.
	flush, err := http.Post(fleet.Engine("E2").URL()+"/flush_cache", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	flush.Body.Close()
	wait.For(t, "the index to forget E2's blocks after its cache flush", func() bool {
		return len(holders(deps.KV, ids)) == 0
	})
	sel, err := resolver.Route(context.Background(), &policy.Facts{Model: "m", InputTokens: int64(len(next)), TokenIDs: next}, nil)
	if err != nil || !strings.HasPrefix(sel.Plain.Reason, "no usable prefix holder") {
		t.Fatalf("after the flush: %+v, %v; want the load fallback", sel.Plain, err)
	}
}

// chat sends one user message to an engine and returns the prompt's token ids as the
// engine tokenizes them.
func chat(t *testing.T, url, content string) []uint32 {
	t.Helper()
	msgs := []token.Message{{Role: "user", Content: content}}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "max_tokens": 1})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %s", resp.Status)
	}
	return token.EncodeChat(msgs)
}

// holders returns the engines holding a prefix of ids, with its length in blocks.
func holders(ix *kv.Index, ids []uint32) map[string]int {
	out := map[string]int{}
	for _, m := range ix.Lookup(ids, kv.DefaultBlockSize) {
		out[m.Engine] = m.Blocks
	}
	return out
}
