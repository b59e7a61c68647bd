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

// walkTestIndex is an index of n engines of two ranks each.
func walkTestIndex(n int) *Index {
	var engines []plan.Engine
	for i := range n {
		engines = append(engines, plan.Engine{ID: fmt.Sprint("E", i), Model: "m", DPSize: 2, KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}})
	}
	return NewIndex(&plan.Plan{Engines: engines})
}

// checkWalk fails the test unless the lookup of hashes answers what the walk from block 0
// answers.
func checkWalk(t *testing.T, ix *Index, hashes []int64, seed uint64, step int) {
	t.Helper()
	got := map[string]int{}
	for _, m := range ix.LookupHashes(hashes, DefaultBlockSize) {
		got[m.Engine] = m.Blocks
	}
	if want := referenceLookup(ix, hashes, DefaultBlockSize); !maps.Equal(got, want) {
		t.Fatalf("seed %d, step %d, %d blocks: %v, want %v", seed, step, len(hashes), got, want)
	}
}

// Lookups of a conversation's growing prompts, while ranks store, lose and clear its
// blocks, answer what a walk from block 0 answers. The blocks are stored by hash alone,
// of unknown place, so a remembered walk is used only while its ranks lost nothing.
func TestRememberedWalksAreExact(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		ix := walkTestIndex(3)
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
			checkWalk(t, ix, conv[:used], seed, step)
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

// tokenChain is a conversation stored with token ids: the engine's hash of each block,
// its token ids and the router's hash, which chains over the blocks before it. Conversations
// made from the same seed and prefix share their first prefix blocks.
type tokenChain struct {
	engine, router []int64
	tokens         [][]uint32
}

func newTokenChain(base *tokenChain, prefix, blocks int, rng *rand.Rand) *tokenChain {
	c := &tokenChain{}
	var parent *[32]byte
	var digest [32]byte
	for i := range blocks {
		ids := make([]uint32, DefaultBlockSize)
		var engine int64
		if base != nil && i < prefix {
			ids, engine = base.tokens[i], base.engine[i]
		} else {
			for j := range ids {
				ids[j] = rng.Uint32()
			}
			engine = int64(rng.Uint64())
		}
		var router int64
		digest, router, _ = chainHash(parent, ids, nil)
		parent = &digest
		c.engine, c.router, c.tokens = append(c.engine, engine), append(c.router, router), append(c.tokens, ids)
	}
	return c
}

// store is the event storing blocks a to b of the chain, its parent named when a > 0.
func (c *tokenChain) store(a, b int) Event {
	e := Event{Kind: BlockStored, Hashes: c.engine[a:b], BlockSize: DefaultBlockSize, Medium: MediumGPU}
	for _, ids := range c.tokens[a:b] {
		e.Tokens = append(e.Tokens, ids...)
	}
	if a > 0 {
		e.Parent, e.HasParent = c.engine[a-1], true
	}
	return e
}

// With blocks stored with token ids, whose places the index knows, a rank that loses
// blocks keeps the part of its remembered walk before them; lookups of two branches of
// a conversation still answer what a walk from block 0 answers.
func TestRememberedWalksAreExactWithPlacedLosses(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 2))
		ix := walkTestIndex(2)
		trunk := newTokenChain(nil, 0, 300, rng)
		convs := []*tokenChain{trunk, newTokenChain(trunk, 100+rng.IntN(150), 300, rng)}
		used, conv := 0, trunk
		for step := range 400 {
			e, rank, c := fmt.Sprint("E", rng.IntN(2)), rng.IntN(2), convs[rng.IntN(2)]
			switch op := rng.IntN(12); {
			case op < 5: // a store of a run of blocks, whose parent the rank may lack
				a := rng.IntN(len(c.engine))
				if rng.IntN(2) == 0 {
					a = 0
				}
				ix.Apply(e, rank, c.store(a, min(len(c.engine), a+1+rng.IntN(200))))
			case op < 8:
				ix.Apply(e, rank, Event{Kind: BlockRemoved, Hashes: []int64{c.engine[rng.IntN(len(c.engine))]}, Medium: MediumGPU})
			case op < 9:
				ix.ClearRank(e, rank)
			default: // the conversation grows by a turn, or a lookup starts over
				used = min(len(conv.router), used+rng.IntN(40))
				if rng.IntN(6) == 0 {
					conv, used = c, minWalkMemo+rng.IntN(len(c.router)-minWalkMemo)
				}
			}
			if used == 0 {
				continue
			}
			checkWalk(t, ix, conv.router[:used], seed, step)
		}
	}
}

// A rank that loses a block past the remembered prefix keeps the whole of it; one that
// loses a block within it walks from that block; a lost block of unknown place, or more
// losses than the log keeps, start the walk from block 0.
func TestLossesMoveTheWalksStartToTheirPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ix := NewIndex(&plan.Plan{Engines: []plan.Engine{{ID: "E1", Model: "m", KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}}}})
	conv := newTokenChain(nil, 0, 1000, rng)
	ix.Apply("E1", 0, conv.store(0, 1000))
	if ms := ix.LookupHashes(conv.router[:900], DefaultBlockSize); len(ms) != 1 || ms[0].Blocks != 900 {
		t.Fatalf("first turn: %v", ms)
	}
	o, _ := ix.rank("E1", 0)
	from := func() int { return ix.walks.get(conv.router).from(o, ix.ranks[o]) }
	ix.Apply("E1", 0, Event{Kind: BlockRemoved, Hashes: conv.engine[950:951], Medium: MediumGPU})
	if got := from(); got != 900 {
		t.Errorf("after a loss at block 950, the walk starts at block %d, want 900", got)
	}
	ix.Apply("E1", 0, Event{Kind: BlockRemoved, Hashes: conv.engine[500:501], Medium: MediumGPU})
	if got := from(); got != 500 {
		t.Errorf("after a loss at block 500, the walk starts at block %d, want 500", got)
	}
	if ms := ix.LookupHashes(conv.router, DefaultBlockSize); len(ms) != 1 || ms[0].Blocks != 500 {
		t.Fatalf("after the losses: %v, want 500 blocks", ms)
	}
	ix.Apply("E1", 0, Event{Kind: BlockStored, Hashes: []int64{-1}, Medium: MediumGPU}) // by hash alone: no place
	ix.Apply("E1", 0, Event{Kind: BlockRemoved, Hashes: []int64{-1}, Medium: MediumGPU})
	if got := from(); got != 1 {
		t.Errorf("after the loss of a block of unknown place, the walk starts at block %d, want 1", got)
	}
	ix.LookupHashes(conv.router[:400], DefaultBlockSize)
	other := newTokenChain(nil, 0, lossLog+1, rng)
	ix.Apply("E1", 0, other.store(0, len(other.engine)))
	for _, h := range other.engine[1:] {
		ix.Apply("E1", 0, Event{Kind: BlockRemoved, Hashes: []int64{h}, Medium: MediumGPU})
	}
	if got := from(); got != 1 {
		t.Fatalf("after %d losses, the walk starts at block %d, want 1", lossLog, got)
	}
	if got := ix.ranks[o].intact(400, ix.ranks[o].unlinked-lossLog); got != 1 {
		t.Errorf("the log's %d losses, the earliest at block 1: %d blocks intact, want 1", lossLog, got)
	}
}

// Places past maxPos-1 are kept as maxPos-1: a loss that far down a chain leaves the
// first maxPos-1 blocks, and the lookup still answers exactly.
func TestLossesPastTheLargestPlace(t *testing.T) {
	ix := NewIndex(&plan.Plan{Engines: []plan.Engine{{ID: "E1", Model: "m", KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}}}})
	conv := newTokenChain(nil, 0, maxPos+10, rand.New(rand.NewPCG(8, 8)))
	ix.Apply("E1", 0, conv.store(0, len(conv.engine)))
	if ms := ix.LookupHashes(conv.router, DefaultBlockSize); len(ms) != 1 || ms[0].Blocks != maxPos+10 {
		t.Fatalf("first lookup: %v", ms)
	}
	o, _ := ix.rank("E1", 0)
	ix.Apply("E1", 0, Event{Kind: BlockRemoved, Hashes: conv.engine[maxPos+5 : maxPos+6], Medium: MediumGPU})
	if got := ix.walks.get(conv.router).from(o, ix.ranks[o]); got != maxPos-1 {
		t.Errorf("after a loss at block %d, the walk starts at block %d, want %d", maxPos+5, got, maxPos-1)
	}
	if ms := ix.LookupHashes(conv.router, DefaultBlockSize); len(ms) != 1 || ms[0].Blocks != maxPos+5 {
		t.Fatalf("after the loss: %v, want %d blocks", ms, maxPos+5)
	}
}
