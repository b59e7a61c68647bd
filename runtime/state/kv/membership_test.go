package kv

import (
	"fmt"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// TestEnginesComingAndGoingReusePlaces: engines added and dropped one at a time keep the
// index at one engine's size, and a dropped engine's blocks are gone.
func TestEnginesComingAndGoingReusePlaces(t *testing.T) {
	ix := NewIndex(nil)
	for i := range 100 {
		e := plan.Engine{ID: fmt.Sprintf("E%d", i), Model: "m", DPSize: 2, KVEvents: &plan.KVEvents{}}
		ix.AddEngine(e)
		if !ix.Apply(e.ID, 1, Event{Kind: BlockStored, Hashes: []int64{int64(i)}}) {
			t.Fatal("the added engine's rank is unknown")
		}
		if ix.Blocks(e.ID) != 1 || len(ix.LookupHashes([]int64{int64(i)}, DefaultBlockSize)) != 1 {
			t.Fatalf("the added engine holds %d blocks", ix.Blocks(e.ID))
		}
		ix.DropEngine(e.ID)
		if ix.Blocks(e.ID) != 0 || ix.Apply(e.ID, 0, Event{Kind: BlockStored, Hashes: []int64{1}}) || len(ix.LookupHashes([]int64{int64(i)}, DefaultBlockSize)) != 0 {
			t.Fatal("a dropped engine still holds blocks or takes events")
		}
	}
	if len(ix.ownerOf) != 2 || len(ix.ranks) != 2 {
		t.Errorf("the index has %d owners after 100 two-rank engines came and went one at a time, want 2", len(ix.ownerOf))
	}
	if len(ix.BlockSizes("m")) != 0 {
		t.Errorf("block sizes of a model without engines: %v", ix.BlockSizes("m"))
	}
}
