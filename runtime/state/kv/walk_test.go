package kv

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// referenceLookup is the walk from block 0 for every rank, without remembered walks.
func referenceLookup(ix *Index, hashes []int64, blockSize int) map[string]int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := map[string]int{}
	for _, o := range ix.owners(hashes[0]) {
		if ix.ownerOf[o].blockSize != blockSize {
			continue
		}
		n := 1
		for n < len(hashes) && slices.Contains(ix.owners(hashes[n]), o) {
			n++
		}
		id := ix.ownerOf[o].id
		out[id] = max(out[id], n)
	}
	return out
}

// Lookups of a conversation's growing prompts, while ranks store, lose and clear its
// blocks, answer what a walk from block 0 answers: a remembered walk is used only while
// its ranks lost nothing.
func TestRememberedWalksAreExact(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var engines []plan.Engine
		for i := range 3 {
			engines = append(engines, plan.Engine{ID: fmt.Sprint("E", i), Model: "m", DPSize: 2, KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}})
		}
		ix := NewIndex(&plan.Plan{Engines: engines})
		conv := make([]int64, 400)
		for i := range conv {
			conv[i] = int64(rng.Uint64())
		}
		used := 0
		for step := range 300 {
			e, rank := fmt.Sprint("E", rng.IntN(3)), rng.IntN(2)
			switch op := rng.IntN(10); {
			case op < 4: // a store of a run of blocks
				a := rng.IntN(len(conv))
				b := min(len(conv), a+1+rng.IntN(200))
				ix.Apply(e, rank, Event{Kind: BlockStored, Hashes: conv[a:b]})
			case op < 6:
				ix.Apply(e, rank, Event{Kind: BlockRemoved, Hashes: []int64{conv[rng.IntN(len(conv))]}})
			case op < 7:
				ix.ClearRank(e, rank)
			default: // the conversation grows by a turn, or a lookup starts over
				used = min(len(conv), used+rng.IntN(40))
				if rng.IntN(8) == 0 {
					used = minWalkMemo + rng.IntN(len(conv)-minWalkMemo)
				}
			}
			if used == 0 {
				continue
			}
			got := map[string]int{}
			for _, m := range ix.LookupHashes(conv[:used], DefaultBlockSize) {
				got[m.Engine] = m.Blocks
			}
			if want := referenceLookup(ix, conv[:used], DefaultBlockSize); !maps.Equal(got, want) {
				t.Fatalf("seed %d, step %d, %d blocks: %v, want %v", seed, step, used, got, want)
			}
		}
	}
}

// A conversation grown by a turn starts each rank's walk where its last lookup ended.
func TestGrownPromptStartsWhereTheLastWalkEnded(t *testing.T) {
	ix := NewIndex(&plan.Plan{Engines: []plan.Engine{{ID: "E1", Model: "m", KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}}}})
	conv := make([]int64, 1000)
	for i := range conv {
		conv[i] = int64(i)*7919 + 1
	}
	ix.Apply("E1", 0, Event{Kind: BlockStored, Hashes: conv})
	if ms := ix.LookupHashes(conv[:900], DefaultBlockSize); len(ms) != 1 || ms[0].Blocks != 900 {
		t.Fatalf("first turn: %v", ms)
	}
	o, _ := ix.rank("E1", 0)
	if from := ix.walks.get(conv).from(o, ix.ranks[o]); from != 900 {
		t.Errorf("the grown prompt's walk starts at block %d, want 900", from)
	}
	ix.Apply("E1", 0, Event{Kind: BlockRemoved, Hashes: conv[10:11]})
	if from := ix.walks.get(conv).from(o, ix.ranks[o]); from != 1 {
		t.Errorf("after the rank lost a block, the walk starts at block %d, want 1", from)
	}
	if ms := ix.LookupHashes(conv, DefaultBlockSize); len(ms) != 1 || ms[0].Blocks != 10 {
		t.Fatalf("after the loss: %v, want 10 blocks", ms)
	}
}

// The remembered walks are bounded: at most maxWalks of them, none of more than
// maxWalkRanks ranks, and none for a short prompt.
func TestRememberedWalksAreBounded(t *testing.T) {
	var w walks
	hashes := make([]int64, minWalkMemo)
	for i := range 3 * maxWalks {
		hashes[minWalkMemo-1] = int64(i)
		w.put(hashes, &walk{blocks: minWalkMemo, last: int64(i)})
		if len(w.m) > maxWalks {
			t.Fatalf("%d walks remembered, bound %d", len(w.m), maxWalks)
		}
	}
	w = walks{}
	w.put(hashes, &walk{blocks: minWalkMemo, held: make([]walkHeld, maxWalkRanks+1)})
	w.put(hashes[:minWalkMemo-1], &walk{blocks: minWalkMemo - 1})
	if len(w.m) != 0 {
		t.Errorf("%d walks remembered of too many ranks or too few blocks", len(w.m))
	}
}
