package kv

import (
	"fmt"
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
	for b.Loop() {
		if m, err := decodeMessage(fr); err != nil || len(m.events) != 32 {
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
