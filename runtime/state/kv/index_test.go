package kv

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
)

// testPlan has engines A (2 DP ranks), B, C with 16-token pages, D with 4-token pages,
// and E without KV events.
func testPlan() *plan.Plan {
	kv := func(bs int) *plan.KVEvents {
		return &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1", BlockSize: bs}
	}
	return &plan.Plan{Engines: []plan.Engine{
		{ID: "A", Model: "m", DPSize: 2, KVEvents: kv(0)},
		{ID: "B", Model: "m", DPSize: 1, KVEvents: kv(16)},
		{ID: "C", Model: "m", KVEvents: kv(16)},
		{ID: "D", Model: "m", KVEvents: kv(4)},
		{ID: "E", Model: "m"},
	}}
}

func ids(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i * 7)
	}
	return out
}

func stored(hashes ...int64) Event {
	return Event{Kind: BlockStored, Hashes: hashes, Medium: MediumGPU}
}

func matches(ms []Match) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.Engine+"="+string(rune('0'+m.Blocks)))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func TestIndexLookupWalksTheChain(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(16 * 5) // five full blocks
	h := token.BlockHashes(prompt, 16)
	other := token.BlockHashes(append([]uint32{999}, prompt[1:]...), 16)

	ix.Apply("A", 0, stored(h[0], h[1]))
	ix.Apply("A", 1, stored(h[0], h[1], h[2], h[3])) // the engine's best rank counts
	ix.Apply("B", 0, stored(h[0], h[2], h[3], h[4])) // a hole at block 1 ends its prefix
	ix.Apply("C", 0, stored(other...))               // same blocks after a different first token
	ix.Apply("D", 0, stored(token.BlockHashes(prompt, 4)[:3]...))

	if got, want := matches(ix.Lookup(prompt, 16)), "A=4 B=1"; got != want {
		t.Fatalf("Lookup(16) = %s, want %s", got, want)
	}
	if got, want := matches(ix.Lookup(prompt, 4)), "D=3"; got != want {
		t.Fatalf("Lookup(4) = %s, want %s: page sizes are separate hash spaces", got, want)
	}
	if got := ix.Lookup(prompt[:15], 16); got != nil {
		t.Fatalf("a prompt shorter than one block matched %v", got)
	}
	if got := ix.Lookup(prompt[:16*3+5], 16); matches(got) != "A=3 B=1" {
		t.Fatalf("a prompt of 3 full blocks matched %s", matches(got))
	}
	if got, want := ix.BlockSizes("m"), []int{16, 4}; !slices.Equal(got, want) {
		t.Fatalf("BlockSizes = %v, want %v (A's unset size is the default)", got, want)
	}
	var nilIndex *Index
	if nilIndex.Lookup(prompt, 16) != nil || nilIndex.BlockSizes("m") != nil {
		t.Fatal("a nil index matched")
	}
}

func TestIndexRemovalAndTiers(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(16 * 3)
	h := token.BlockHashes(prompt, 16)
	ix.Apply("B", 0, stored(h...))
	ix.Apply("B", 0, Event{Kind: BlockStored, Hashes: h[2:], Medium: MediumCPU})

	// Evicted from GPU but kept in host memory: still held.
	ix.Apply("B", 0, Event{Kind: BlockRemoved, Hashes: h[2:], Medium: MediumGPU})
	if got := matches(ix.Lookup(prompt, 16)); got != "B=3" {
		t.Fatalf("after a GPU eviction with a CPU copy: %s, want B=3", got)
	}
	// A removal without a medium drops every tier.
	ix.Apply("B", 0, Event{Kind: BlockRemoved, Hashes: h[1:2], Medium: allMedia})
	if got := matches(ix.Lookup(prompt, 16)); got != "B=1" {
		t.Fatalf("after removing block 1: %s, want B=1", got)
	}
	// Removing what is not held is a no-op.
	ix.Apply("B", 0, Event{Kind: BlockRemoved, Hashes: []int64{12345}, Medium: allMedia})
	if ix.Blocks("B") != 2 {
		t.Fatalf("B holds %d blocks, want 2", ix.Blocks("B"))
	}

	ix.Apply("C", 0, stored(h...))
	ix.Apply("B", 0, Event{Kind: AllBlocksCleared})
	if got := matches(ix.Lookup(prompt, 16)); got != "C=3" {
		t.Fatalf("after B cleared: %s, want C=3", got)
	}
	if ix.Blocks("B") != 0 {
		t.Fatal("AllBlocksCleared left blocks")
	}
}

func TestIndexClearRankAndRemoveEngine(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(32)
	h := token.BlockHashes(prompt, 16)
	ix.Apply("A", 0, stored(h...))
	ix.Apply("A", 1, stored(h[0]))
	ix.Apply("B", 0, stored(h...))

	ix.ClearRank("A", 0)
	if got := matches(ix.Lookup(prompt, 16)); got != "A=1 B=2" {
		t.Fatalf("after clearing A's rank 0: %s", got)
	}
	ix.RemoveEngine("A")
	if got := matches(ix.Lookup(prompt, 16)); got != "B=2" {
		t.Fatalf("after removing A: %s", got)
	}
	if ix.blocks.len() != 2 || len(ix.owners(h[0])) != 1 {
		t.Fatalf("removed owners linger in the hash map: %v", ix.blocks)
	}

	// Unknown engines and ranks are refused, not indexed.
	if ix.Apply("E", 0, stored(h...)) || ix.Apply("A", 2, stored(h...)) || ix.Apply("Z", 0, stored(h...)) {
		t.Fatal("Apply accepted an engine rank the index does not know")
	}
	ix.ClearRank("Z", 0)
	ix.RemoveEngine("Z")
}

// TestManyOwnersOfABlock: a block keeps its first owners in itself and moves them all
// out once more ranks hold it; lookups and removals see every owner either way.
func TestManyOwnersOfABlock(t *testing.T) {
	p := &plan.Plan{}
	for i := range 6 {
		p.Engines = append(p.Engines, plan.Engine{ID: fmt.Sprintf("E%d", i), Model: "m", KVEvents: &plan.KVEvents{}})
	}
	ix := NewIndex(p)
	prompt := ids(16 * 2)
	h := token.BlockHashes(prompt, 16)
	want := ""
	for i, e := range p.Engines {
		ix.Apply(e.ID, 0, vllmStore(prompt, []int64{int64(10 * i), int64(10*i + 1)}, nil))
		want = strings.TrimSpace(want + fmt.Sprintf(" %s=2", e.ID))
		if got := matches(ix.Lookup(prompt, 16)); got != want {
			t.Fatalf("after %d stores: lookup = %s, want %s", i+1, got, want)
		}
	}
	for _, i := range []int{4, 0, 5, 2, 1} {
		ix.Apply(p.Engines[i].ID, 0, Event{Kind: BlockRemoved, Hashes: []int64{int64(10 * i)}, Medium: allMedia})
	}
	if got := matches(ix.LookupHashes(h, 16)); got != "E3=2" {
		t.Fatalf("after five removals of block 0: lookup = %s, want E3=2", got)
	}
	if got := len(ix.owners(h[1])); got != 6 {
		t.Fatalf("block 1 has %d owners, want 6", got)
	}
	ix.Apply("E3", 0, Event{Kind: AllBlocksCleared})
	if ix.blocks.ref(h[0]) != nil || len(ix.owners(h[1])) != 5 {
		t.Fatalf("after E3 cleared: block 0 %v, block 1's owners %v", ix.blocks.ref(h[0]), ix.owners(h[1]))
	}
}
