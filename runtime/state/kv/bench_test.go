package kv

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
)

// benchIndex is 64 engines with 16-token pages, each holding 4096 unrelated blocks, and
// engine 7 holding the whole prompt too.
func benchIndex(b *testing.B, prompt []uint32) *Index {
	p := &plan.Plan{}
	for i := range 64 {
		p.Engines = append(p.Engines, plan.Engine{ID: fmt.Sprintf("E%02d", i), Model: "m", KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}})
	}
	ix := NewIndex(p)
	other := make([]int64, 4096)
	for i, e := range p.Engines {
		for j := range other {
			other[j] = int64(i)<<32 | int64(j)
		}
		ix.Apply(e.ID, 0, Event{Kind: BlockStored, Hashes: other, Medium: MediumGPU})
	}
	ix.Apply("E07", 0, Event{Kind: BlockStored, Hashes: token.BlockHashes(prompt, DefaultBlockSize), Medium: MediumGPU})
	return ix
}

func benchPrompt(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i*2654435761) >> 8
	}
	return ids
}

// BenchmarkIndexLookup is a lookup of a prompt the index holds in full on one engine:
// "hash+walk" is Lookup (SGLang's block hashes of the prompt, then the walk), "walk" is
// LookupHashes on precomputed hashes.
func BenchmarkIndexLookup(b *testing.B) {
	for _, n := range []int{1024, 8192, 32768} {
		prompt := benchPrompt(n)
		ix := benchIndex(b, prompt)
		hashes := token.BlockHashes(prompt, DefaultBlockSize)
		b.Run(fmt.Sprintf("tokens=%d/hash+walk", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ms := ix.Lookup(prompt, DefaultBlockSize); len(ms) != 1 || ms[0].Blocks != n/DefaultBlockSize {
					b.Fatalf("matches %v", ms)
				}
			}
		})
		b.Run(fmt.Sprintf("tokens=%d/walk", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ms := ix.LookupHashes(hashes, DefaultBlockSize); len(ms) != 1 {
					b.Fatalf("matches %v", ms)
				}
			}
		})
	}
}

// BenchmarkDecodeMessage decodes a batch of 32 BlockStored events of 16 tokens each, as
// SGLang publishes one event per page.
func BenchmarkDecodeMessage(b *testing.B) {
	var events []any
	for i := range 32 {
		toks := make([]any, 16)
		for j := range toks {
			toks[j] = uint32(i*16 + j)
		}
		events = append(events, []any{"BlockStored", []any{int64(i) * 7919}, int64(i-1) * 7919, toks, 16, nil, "GPU"})
	}
	payload := encode(b, []any{float64(time.Now().Unix()), events, 0})
	fr := frames(1, payload)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	var sc scratch
	for b.Loop() {
		if m, err := decodeMessage(fr, &sc); err != nil || len(m.events) != 32 {
			b.Fatalf("decoding the batch: %v (%d events, want 32)", err, len(m.events))
		}
	}
}

// heapInUse returns the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// eventBatches is a publisher's traffic in steady state, pre-encoded: batch i stores one
// sequence of blocks (its own tokens and engine hashes, chained from no parent) and
// evicted[i] removes the blocks batch i stored, one event per block as both engines
// publish evictions. SGLang publishes a store event per page; vLLM one event per
// request's new blocks, with the block hashes of its seeded digest.
type eventBatches struct {
	stored, evicted [][][]byte // frames of each message
	events          int        // events in one stored and one evicted message together
}

const (
	benchBatches        = 64 // distinct sequences, reused in a ring
	benchBlocksPerBatch = 32 // blocks of one sequence, 512 tokens
)

func newEventBatches(b testing.TB, vllm bool) eventBatches {
	var out eventBatches
	for i := range benchBatches {
		hashes := make([]any, benchBlocksPerBatch)
		toks := make([]any, benchBlocksPerBatch*DefaultBlockSize)
		for j := range hashes {
			hashes[j] = uint64(i)<<40 | uint64(j)*0x9e3779b97f4a7c15>>24
		}
		for j := range toks {
			toks[j] = uint32(i*len(toks)+j) % 151_000 // a Qwen-sized vocabulary
		}
		var stores, removals []any
		if vllm {
			extra := make([]any, benchBlocksPerBatch)
			stores = append(stores, map[string]any{"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": nil,
				"token_ids": toks, "block_size": DefaultBlockSize, "lora_id": nil, "medium": "GPU", "lora_name": nil,
				"extra_keys": extra, "group_idx": 0, "kv_cache_spec_kind": "full_attention"})
		} else {
			for j, h := range hashes {
				var parent any
				if j > 0 {
					parent = hashes[j-1]
				}
				stores = append(stores, []any{"BlockStored", []any{h}, parent, toks[j*DefaultBlockSize : (j+1)*DefaultBlockSize], DefaultBlockSize, nil, "GPU"})
			}
		}
		for _, h := range hashes {
			if vllm {
				removals = append(removals, map[string]any{"type": "BlockRemoved", "block_hashes": []any{h}, "medium": "GPU", "group_idx": 0})
			} else {
				removals = append(removals, []any{"BlockRemoved", []any{h}, "GPU"})
			}
		}
		batch := func(events []any) [][]byte {
			if vllm {
				return frames(uint64(i), encode(b, map[string]any{"ts": 1.5, "events": events, "data_parallel_rank": 0}))
			}
			return frames(uint64(i), encode(b, []any{1.5, events, 0}))
		}
		out.stored = append(out.stored, batch(stores))
		out.evicted = append(out.evicted, batch(removals))
		out.events = len(stores) + len(removals)
	}
	return out
}

// BenchmarkKVEvents is what the KV-event indexing costs the router in steady state: one
// op decodes and applies a message storing a sequence of 32 blocks and one removing the
// 32 blocks stored half a ring ago, so the rank holds about 1000 blocks throughout.
// block/op is the cost per stored block including its later removal, which is the cost
// of an engine storing blocks at a given rate; event/op the cost per event. "decode" is
// the messages' decoding alone; the index's share is the difference.
func BenchmarkKVEvents(b *testing.B) {
	for _, engine := range []string{"sglang", "vllm"} {
		batches := newEventBatches(b, engine == "vllm")
		b.Run(engine+"/decode+apply", func(b *testing.B) {
			ix := NewIndex(&plan.Plan{Engines: []plan.Engine{{ID: "E1", Model: "m", KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}}}})
			i := 0
			var sc scratch // a subscription's, as the router decodes
			for b.Loop() {
				for _, fr := range [][][]byte{batches.stored[i%benchBatches], batches.evicted[(i+benchBatches/2)%benchBatches]} {
					m, err := decodeMessage(fr, &sc)
					if err != nil {
						b.Fatal(err)
					}
					ix.Apply("E1", 0, m.events...)
				}
				i++
			}
			if n := ix.Blocks("E1"); n != benchBatches/2*benchBlocksPerBatch {
				b.Fatalf("rank holds %d blocks, want %d: the events were not applied as stores and removals", n, benchBatches/2*benchBlocksPerBatch)
			}
			reportPer(b, batches.events)
		})
		b.Run(engine+"/decode", func(b *testing.B) {
			i := 0
			var sc scratch
			for b.Loop() {
				for _, fr := range [][][]byte{batches.stored[i%benchBatches], batches.evicted[i%benchBatches]} {
					if _, err := decodeMessage(fr, &sc); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
			reportPer(b, batches.events)
		})
	}
}

// reportPer reports the time of an op per stored block and per event.
func reportPer(b *testing.B, events int) {
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/benchBlocksPerBatch, "ns/block")
	b.ReportMetric(perOp/float64(events), "ns/event")
}

// BenchmarkIndexChurn is the index's share of bench/cmd/kvevents's steady state with a
// working set larger than the CPU's caches: 4 ranks each holding 65 536 blocks, and one
// op a batch to the next rank in turn of 25 chained 16-token blocks stored (one event
// each, as SGLang publishes them) and the rank's 25 oldest removed. ns/block is per
// stored block with its removal.
func BenchmarkIndexChurn(b *testing.B) {
	const ranks, live, batch = 4, 1 << 16, 25
	p := &plan.Plan{}
	for i := range ranks {
		p.Engines = append(p.Engines, plan.Engine{ID: fmt.Sprintf("E%d", i), Model: "m", KVEvents: &plan.KVEvents{}})
	}
	ix := NewIndex(p)
	next := make([]int64, ranks) // each rank's next engine hash; it holds [next-live, next)
	toks := make([]uint32, batch*DefaultBlockSize)
	events := make([]Event, 2*batch)
	hashes := make([]int64, 2*batch)
	apply := func(r int, removals bool) {
		for i := range batch {
			for j := range DefaultBlockSize {
				toks[i*DefaultBlockSize+j] = uint32(next[r]+int64(i))*31 + uint32(j)
			}
			hashes[i] = int64(r)<<48 | (next[r] + int64(i) + 1)
			events[i] = Event{Kind: BlockStored, Hashes: hashes[i : i+1], Tokens: toks[i*DefaultBlockSize : (i+1)*DefaultBlockSize], Medium: MediumGPU}
			if i > 0 {
				events[i].Parent, events[i].HasParent = hashes[i-1], true
			}
			hashes[batch+i] = int64(r)<<48 | (next[r] - live + int64(i) + 1)
			events[batch+i] = Event{Kind: BlockRemoved, Hashes: hashes[batch+i : batch+i+1], Medium: allMedia}
		}
		n := batch
		if removals {
			n = 2 * batch
		}
		ix.Apply(p.Engines[r].ID, 0, events[:n]...)
		next[r] += batch
	}
	for r := range ranks {
		for next[r] < live {
			apply(r, false)
		}
	}
	b.ResetTimer()
	r := 0
	for b.Loop() {
		apply(r, true)
		r = (r + 1) % ranks
	}
	if n := ix.Blocks("E0"); n < live-batch || n > live+batch {
		b.Fatalf("rank 0 holds %d blocks, want about %d", n, live)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/block")
}

// BenchmarkGrownTurnWithEvictions is one turn of a 133k-token conversation (8320 blocks,
// stored with token ids) on a rank that also holds a longer one: the engine stores the
// turn's 20 new blocks and, as a full cache does every turn, evicts 20 of the other
// conversation's blocks, leaves first; then the router looks the grown prompt up.
func BenchmarkGrownTurnWithEvictions(b *testing.B) {
	const turn, history = 20, 8320
	rng := rand.New(rand.NewPCG(1, 1))
	ix := NewIndex(&plan.Plan{Engines: []plan.Engine{{ID: "E1", Model: "m", KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}}}})
	other := newTokenChain(nil, 0, history+2*turn*(b.N+1), rng)
	ix.Apply("E1", 0, other.store(0, len(other.engine)))
	conv := newTokenChain(nil, 0, history+turn*(b.N+1), rng)
	ix.Apply("E1", 0, conv.store(0, history))
	ix.LookupHashes(conv.router[:history], DefaultBlockSize)
	evict, used := len(other.engine), history
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ix.Apply("E1", 0, conv.store(used, used+turn))
		evict -= turn
		ix.Apply("E1", 0, Event{Kind: BlockRemoved, Hashes: other.engine[evict : evict+turn], Medium: MediumGPU})
		used += turn
		if ms := ix.LookupHashes(conv.router[:used], DefaultBlockSize); len(ms) != 1 || ms[0].Blocks != used {
			b.Fatalf("matches %v, want %d blocks", ms, used)
		}
	}
}
