package kv

import (
	"math/rand/v2"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
)

func TestChainHashIsSGLangsPageHash(t *testing.T) {
	prompt := ids(16 * 4)
	want := token.BlockHashes(prompt, 16)
	var parent *[32]byte
	var buf []byte
	for i := range want {
		d, h, b := chainHash(parent, prompt[i*16:(i+1)*16], buf)
		buf = b
		if h != want[i] {
			t.Fatalf("block %d: chainHash = %d, token.BlockHashes = %d", i, h, want[i])
		}
		parent = &d
	}
}

// vllmStore is a BlockStored event as vLLM sends it: the engine's own hashes, which the
// router cannot reproduce, over the token ids of n blocks.
func vllmStore(tokens []uint32, engineHashes []int64, parent *int64) Event {
	e := Event{Kind: BlockStored, Hashes: engineHashes, Medium: MediumGPU, Tokens: tokens, BlockSize: len(tokens) / len(engineHashes)}
	if parent != nil {
		e.Parent, e.HasParent = *parent, true
	}
	return e
}

func TestStoredBlocksAreRehashedFromTokens(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(16 * 4)
	// Engine B (vLLM-like) stores blocks 0-1 in one event and 2-3 in another whose parent
	// it names by its own hash.
	vh := []int64{-101, -102, -103, -104}
	ix.Apply("B", 0, vllmStore(prompt[:32], vh[:2], nil))
	ix.Apply("B", 0, vllmStore(prompt[32:], vh[2:], &vh[1]))
	// Engine C (SGLang) stores one page per event, named by SGLang's hash.
	sh := token.BlockHashes(prompt, 16)
	for i := range 3 {
		var parent *int64
		if i > 0 {
			parent = &sh[i-1]
		}
		ix.Apply("C", 0, vllmStore(prompt[i*16:(i+1)*16], sh[i:i+1], parent))
	}
	if got := matches(ix.Lookup(prompt, 16)); got != "B=4 C=3" {
		t.Fatalf("mixed fleet: %s, want B=4 C=3", got)
	}
	// A removal names the engine's hash, whatever the scheme.
	ix.Apply("B", 0, Event{Kind: BlockRemoved, Hashes: []int64{vh[2]}, Medium: allMedia})
	if got := matches(ix.Lookup(prompt, 16)); got != "B=2 C=3" {
		t.Fatalf("after B removed its block 2: %s", got)
	}
	// A store whose parent the rank does not hold cannot be placed, and is counted.
	ix.Apply("B", 0, vllmStore(prompt[32:48], []int64{-200}, &vh[2]))
	if s := ix.Stats("B"); s.Orphans != 1 {
		t.Fatalf("orphans = %d, want 1", s.Orphans)
	}
	// Blocks hashed with more than their tokens are not claimed for plain prompts; a
	// store whose tokens do not fit its blocks is malformed.
	foreign := vllmStore(ids(16), []int64{-300}, nil)
	foreign.Foreign = true
	ix.Apply("D", 0, foreign, vllmStore(ids(15), []int64{-301, -303}, nil))
	bad := vllmStore(ids(16), []int64{-302}, nil)
	bad.BlockSize = 4
	ix.Apply("D", 0, bad)
	if s := ix.Stats("D"); s.Foreign != 1 || s.Malformed != 2 || ix.Blocks("D") != 0 {
		t.Fatalf("stats %+v, blocks %d: want 1 foreign, 2 malformed, none held", s, ix.Blocks("D"))
	}
	// Two tiers: a block moved to CPU and off the GPU is still held.
	moved := vllmStore(prompt[:16], []int64{-101}, nil)
	moved.Medium = MediumCPU
	ix.Apply("B", 0, moved, Event{Kind: BlockRemoved, Hashes: []int64{-101}, Medium: MediumGPU})
	if got := matches(ix.Lookup(prompt, 16)); got != "B=2 C=3" {
		t.Fatalf("after B moved block 0 to CPU: %s", got)
	}
}

func TestMaxBlocksEvictsTheOldest(t *testing.T) {
	p := &plan.Plan{Engines: []plan.Engine{{ID: "V", Model: "m", KVEvents: &plan.KVEvents{MaxBlocks: 4}}}}
	ix := NewIndex(p)
	prompt := ids(16 * 6)
	hs := []int64{1, 2, 3, 4, 5, 6}
	ix.Apply("V", 0, vllmStore(prompt, hs, nil))
	if ix.Blocks("V") != 4 || ix.Stats("V").Evicted != 2 {
		t.Fatalf("blocks %d, evicted %d; want 4 and 2", ix.Blocks("V"), ix.Stats("V").Evicted)
	}
	// The oldest went first: the prompt's first blocks are gone, so it no longer matches.
	if ms := ix.Lookup(prompt, 16); len(ms) != 0 {
		t.Fatalf("lookup after evicting the first blocks = %v", ms)
	}
	if ix.blocks.len() != 4 {
		t.Fatalf("router blocks = %d, want 4", ix.blocks.len())
	}
	// Churn keeps the eviction order bounded by the cap, not by the events seen.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		h := int64(rng.IntN(8))
		if i%2 == 0 {
			ix.Apply("V", 0, Event{Kind: BlockStored, Hashes: []int64{h}, Medium: MediumGPU})
		} else {
			ix.Apply("V", 0, Event{Kind: BlockRemoved, Hashes: []int64{h}, Medium: allMedia})
		}
	}
	rs := ix.ranks[0]
	if rs.held.len() > 4 || len(rs.order) > 2*4+64+1 {
		t.Fatalf("held %d, order %d: not bounded by the cap", rs.held.len(), len(rs.order))
	}
}

func TestOneIndexMatchesSGLangAndVLLMHashesOfOnePrompt(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(16 * 3)
	// The same three blocks under three different naming schemes.
	for _, tc := range []struct {
		engine string
		hashes []int64
	}{{"B", token.BlockHashes(prompt, 16)}, {"C", []int64{7, 8, 9}}} {
		ix.Apply(tc.engine, 0, vllmStore(prompt, tc.hashes, nil))
	}
	ix.Apply("A", 1, vllmStore(prompt, []int64{-1 << 63, 1<<63 - 1, 0}, nil))
	if got := matches(ix.Lookup(prompt, 16)); got != "A=3 B=3 C=3" {
		t.Fatalf("lookup = %s", got)
	}
	ix.Apply("C", 0, Event{Kind: AllBlocksCleared})
	if got := matches(ix.Lookup(prompt, 16)); got != "A=3 B=3" {
		t.Fatalf("after C cleared = %s", got)
	}
}

// BenchmarkIndexBytesPerBlock measures the memory the index spends per cached block: one
// engine rank storing 2^16 distinct blocks in vLLM-style events of 16 blocks each.
func BenchmarkIndexBytesPerBlock(b *testing.B) {
	const blocks = 1 << 16
	prompt := benchPrompt(blocks * DefaultBlockSize)
	var events []Event
	for i := 0; i < blocks; i += 16 {
		hs := make([]int64, 16)
		for j := range hs {
			hs[j] = int64(i + j + 1)
		}
		var parent *int64
		if i > 0 {
			p := int64(i)
			parent = &p
		}
		events = append(events, vllmStore(prompt[i*16:(i+16)*16], hs, parent))
	}
	p := &plan.Plan{Engines: []plan.Engine{{ID: "V", Model: "m", KVEvents: &plan.KVEvents{}}}}
	b.ReportAllocs()
	var perBlock float64
	for b.Loop() {
		before := heapInUse()
		ix := NewIndex(p)
		ix.Apply("V", 0, events...)
		if ix.Blocks("V") != blocks {
			b.Fatalf("held %d blocks, want %d", ix.Blocks("V"), blocks)
		}
		perBlock = float64(heapInUse()-before) / blocks
		keepAlive(ix)
	}
	b.ReportMetric(perBlock, "bytes/block")
}

var sink *Index

func keepAlive(ix *Index) { sink = ix }

// BenchmarkIndexApplyStored is the ingestion of one vLLM-style BlockStored of 16 chained
// 16-token blocks: decoding aside, the router's rehash of every block from its token ids
// and the bookkeeping of engine and router hashes. The rank's cap keeps the index at 4096
// blocks, so steady state includes evicting the oldest.
func BenchmarkIndexApplyStored(b *testing.B) {
	p := &plan.Plan{Engines: []plan.Engine{{ID: "V", Model: "m", KVEvents: &plan.KVEvents{MaxBlocks: 4096}}}}
	ix := NewIndex(p)
	prompt := benchPrompt(16 * DefaultBlockSize)
	hs := make([]int64, 16)
	b.ReportAllocs()
	n := int64(0)
	for b.Loop() {
		prompt[0]++ // another chain each time
		for j := range hs {
			n++
			hs[j] = n
		}
		ix.Apply("V", 0, vllmStore(prompt, hs, nil))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/block")
}
