package policy

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity/redistest"
	"github.com/routerkit/router/runtime/state/load"
)

// The replica-placement model compares, on one multi-turn workload sent round-robin to
// three replicas, the ways replicas could agree on where a prefix lives without KV
// events (docs/serve.md, "Running several routers"):
//
//   - approximate: each replica's approximate index, learned from its own dispatches;
//   - prefix_hash: SMG's prefix_hash policy (lightseekorg/smg
//     model_gateway/src/policies/prefix_hash.rs): a hash of the first 256 tokens placed on
//     engines by consistent hashing (rendezvous here), moved to the least loaded engine
//     when the chosen one's load exceeds 1.25 × the mean (load_ok), each replica counting
//     only its own requests in flight;
//   - store: the approximate index with claims shared through a real redis-server.
//
// Conversations arrive over time and run their turns in rounds: in a round every active
// conversation sends its next turn, each pick counts in flight on its replica until the
// round ends. Halfway through, engine E5 joins and E2 leaves, as an autoscaler would.

// modelWorkload sizes the model's conversations; system is the prompt every conversation
// starts with.
type modelWorkload struct {
	name                string
	convs, turns, start int // conversations, turns each, new conversations per round
	system              int // tokens of the common system prompt
}

type modelResult struct {
	followed, busiest float64
	moved             int // follow-ups moved off an engine that stayed, after the change
}

// placer picks an engine for a prompt on one replica, and learns from the pick.
type placer interface {
	pick(t *testing.T, ids []uint32, workers []*engine.Worker) *engine.Worker
	dispatched(id string, ids []uint32)
	add(e plan.Engine)
	drop(id string)
	// report gives the replica an engine's load report, which every replica reads.
	report(id string, s load.Sample)
}

func modelEngine(id string) plan.Engine {
	return plan.Engine{ID: id, Model: "m", Role: plan.RolePlain, DPSize: 1, Load: plan.LoadSource{StaleAfterMS: 1000}}
}

// cachePlacer is the cache-aware policy over an approximate source on one replica.
type cachePlacer struct {
	deps Deps
	pol  Policy
}

func newCachePlacer(t *testing.T, share, redisAddr string, seed uint64) *cachePlacer {
	src := plan.PrefixSource{Type: "approximate", TTLSecs: 120, BlockSize: 16, Share: share}
	g := plan.Group{Policy: plan.Policy{Type: plan.CacheAware, PrefixSource: &src, MinMatchedTokens: ptr[int64](1024),
		CandidateMinWorkers: 8, CandidateRatio: 0.05, CandidateMaxWorkers: 32, SwitchMarginTokens: ptr[int64](1024), MinLoadChoices: 2,
		PressureGuard: &plan.PressureGuard{Enabled: true, AbsThresholdTokens: 1024, RelThreshold: 1.5}}}
	var engines []plan.Engine
	for _, id := range []string{"E1", "E2", "E3", "E4"} {
		engines = append(engines, modelEngine(id))
	}
	p := &plan.Plan{Engines: engines, Models: []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "b", Groups: plan.Groups{Plain: &g}}}}},
		Bindings: &plan.Bindings{Store: plan.BindingsRedis, Address: redisAddr, KeyPrefix: "model:", TimeoutMS: 500, RetryMS: 1000}}
	deps, err := NewDeps(p, load.NewTable(engines, nil), rand.New(rand.NewPCG(seed, 7)), nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := New("m", g.Policy, deps)
	if err != nil {
		t.Fatal(err)
	}
	return &cachePlacer{deps: deps, pol: pol}
}

func (c *cachePlacer) pick(t *testing.T, ids []uint32, workers []*engine.Worker) *engine.Worker {
	req := &Request{Facts: Facts{Model: "m", InputTokens: int64(len(ids)), TokenIDs: ids}, Stage: plan.RolePlain, BucketID: "b"}
	pk, err := c.pol.Pick(context.Background(), workers, req)
	if err != nil {
		t.Fatal(err)
	}
	c.deps.ClaimDispatch(pk.Engine.ID(), NewBlockHashes(ids))
	return pk.Engine
}

func (c *cachePlacer) dispatched(id string, ids []uint32) {
	c.deps.RecordDispatch(id, NewBlockHashes(ids))
}
func (c *cachePlacer) add(e plan.Engine) { c.deps.AddEngine(e) }
func (c *cachePlacer) drop(id string)    { c.deps.DropEngine(id) }

func (c *cachePlacer) report(id string, s load.Sample) {
	if c.deps.Load.Add(modelEngine(id)); c.deps.Load.Update(id, 0, s) != nil {
		panic("report of an engine outside the table")
	}
}

// prefixHash models SMG's prefix_hash on one replica.
type prefixHash struct{}

func (prefixHash) pick(_ *testing.T, ids []uint32, workers []*engine.Worker) *engine.Worker {
	h := fnv.New64a()
	for _, id := range ids[:min(len(ids), 256)] {
		h.Write(binary.LittleEndian.AppendUint32(nil, id))
	}
	key := h.Sum64()
	var best *engine.Worker
	var bestScore uint64
	var total int64
	for _, w := range workers {
		total += w.Inflight()
		s := fnv.New64a()
		s.Write([]byte(w.ID()))
		s.Write(binary.LittleEndian.AppendUint64(nil, key))
		if score := s.Sum64(); best == nil || score > bestScore {
			best, bestScore = w, score
		}
	}
	ok := func(w *engine.Worker) bool {
		return float64(w.Inflight()) <= float64(total+1)/float64(len(workers))*1.25
	}
	if ok(best) {
		return best
	}
	least := best
	for _, w := range workers {
		if ok(w) && (!ok(least) || w.Inflight() < least.Inflight()) {
			least = w
		}
	}
	return least
}

func (prefixHash) dispatched(string, []uint32) {}
func (prefixHash) add(plan.Engine)             {}
func (prefixHash) drop(string)                 {}
func (prefixHash) report(string, load.Sample)  {}

// replicaModel is three replicas, each with its own workers (and so its own in-flight
// counts) and placer.
type replicaModel struct {
	placers []placer
	workers [][]*engine.Worker
}

func newReplicaModel(placers []placer) *replicaModel {
	m := &replicaModel{placers: placers, workers: make([][]*engine.Worker, len(placers))}
	for i := range placers {
		for _, id := range []string{"E1", "E2", "E3", "E4"} {
			m.workers[i] = append(m.workers[i], engine.New(modelEngine(id)))
		}
	}
	return m
}

func (m *replicaModel) change() {
	for i, p := range m.placers {
		e := modelEngine("E5")
		p.add(e)
		p.drop("E2")
		m.workers[i] = append(slices.DeleteFunc(m.workers[i], func(w *engine.Worker) bool { return w.ID() == "E2" }), engine.New(e))
	}
}

// conversationIDs is the prompt of turn k of conversation c: the common system prompt,
// the conversation's opening (1200 tokens), then per turn an answer and a question.
func conversationIDs(w modelWorkload, c, k int) []uint32 {
	var ids []uint32
	for i := range w.system {
		ids = append(ids, uint32(1+i))
	}
	for i := range 1200 + k*90 {
		ids = append(ids, uint32(1_000_000+c*10_000+i))
	}
	return ids
}

func runModel(t *testing.T, m *replicaModel, w modelWorkload) modelResult {
	engines := make([][]string, w.convs) // engine of each turn sent
	picks := map[string]int{}
	follow, hits, moved := 0, 0, 0
	sent, changed := 0, false
	for round := 0; ; round++ {
		active := min(w.convs, (round+1)*w.start)
		type inflight struct {
			r, c int
			w    *engine.Worker
			ids  []uint32
		}
		var batch []inflight
		queued := map[string]int64{} // uncached tokens queued on each engine this round
		waiting := map[string]int64{}
		for c := range active {
			k := len(engines[c])
			if k == w.turns {
				continue
			}
			r := (c + k) % len(m.placers)
			ids := conversationIDs(w, c, k)
			wk := m.placers[r].pick(t, ids, m.workers[r])
			wk.AddInflight(1)
			batch = append(batch, inflight{r, c, wk, ids})
			// The engine reports its queue to every replica: a new conversation's whole
			// prompt, or a follow-up's new turn when it reached the conversation's engine.
			uncached := int64(len(ids))
			if k > 0 && engines[c][k-1] == wk.ID() {
				uncached = 90
			}
			queued[wk.ID()] += uncached
			waiting[wk.ID()]++
			for _, p := range m.placers {
				p.report(wk.ID(), load.Sample{At: time.Now(), Native: true, Running: 1, Waiting: waiting[wk.ID()],
					WaitingUncachedTokens: queued[wk.ID()], MaxKVTokens: 100_000, MaxRunning: 64})
			}
			picks[wk.ID()]++
			if k > 0 {
				prev := engines[c][k-1]
				if prev != "E2" || !changed {
					follow++
					if prev == wk.ID() {
						hits++
					} else if changed {
						moved++
					}
				}
			}
			engines[c] = append(engines[c], wk.ID())
			sent++
		}
		for _, b := range batch {
			b.w.AddInflight(-1)
			m.placers[b.r].dispatched(b.w.ID(), b.ids)
		}
		if len(batch) == 0 {
			break
		}
		if !changed && sent >= w.convs*w.turns/2 {
			m.change()
			changed = true
		}
	}
	busiest := 0
	for _, n := range picks {
		busiest = max(busiest, n)
	}
	return modelResult{followed: float64(hits) / float64(follow), busiest: float64(busiest) / float64(sent), moved: moved}
}

// TestReplicaPlacementAlternatives measures the alternatives on two workloads, logs the
// table docs/serve.md quotes, and holds the chosen design (the store) to the bar
// where the common prompt is under min_matched_tokens: at least 95% of follow-ups on
// their conversation's engine, no engine above 45% of picks.
func TestReplicaPlacementAlternatives(t *testing.T) {
	redis := redistest.Start(t)
	workloads := []modelWorkload{
		{name: "20-token system prompt", convs: 60, turns: 6, start: 4, system: 20},
		{name: "1000-token system prompt", convs: 60, turns: 6, start: 4, system: 1000},
		// Longer than min_matched_tokens: every new conversation matches the engines
		// holding the system prompt, with one replica as with several (see the docs).
		{name: "2000-token system prompt", convs: 60, turns: 6, start: 4, system: 2000},
	}
	setups := []struct {
		name string
		new  func(r int) placer
	}{
		{"approximate", func(r int) placer { return newCachePlacer(t, plan.ShareNone, redis.Addr(), uint64(r)) }},
		{"prefix_hash", func(int) placer { return prefixHash{} }},
		{"approximate+store", func(r int) placer { return newCachePlacer(t, plan.ShareStore, redis.Addr(), uint64(r)) }},
	}
	for wi, w := range workloads {
		for _, s := range setups {
			if err := redis.Client().FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			m := newReplicaModel([]placer{s.new(3 * wi), s.new(3*wi + 1), s.new(3*wi + 2)})
			res := runModel(t, m, w)
			t.Logf("| %s | %s | %.3f | %.3f | %d |", w.name, s.name, res.followed, res.busiest, res.moved)
			if s.name == "approximate+store" && w.system < 1024 {
				if res.followed < 0.95 || res.busiest >= 0.45 {
					t.Errorf("%s, %s: %.3f of follow-ups on their engine (want ≥ 0.95), busiest %.3f of picks (want < 0.45)",
						w.name, s.name, res.followed, res.busiest)
				}
			}
		}
	}
}
