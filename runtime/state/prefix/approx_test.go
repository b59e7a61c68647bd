package prefix

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

var twoEngines = []Engine{{ID: "A", Model: "m"}, {ID: "B", Model: "m"}, {ID: "X", Model: "other"}}

func seq(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

func TestLookupLongestHeldPrefixPerEngine(t *testing.T) {
	c := newClock()
	a := New(Config{CapacityTokens: 1600, TTL: time.Minute, BlockSize: 16}, twoEngines, c.now)
	a.Insert("A", seq(1, 8))
	a.Insert("B", seq(1, 3))
	a.Insert("X", seq(1, 8)) // another model's engine never matches
	a.Insert("nobody", seq(1, 8))

	got := a.Lookup("m", []int64{1, 2, 3, 4, 99, 6})
	want := []Match{{"A", 4}, {"B", 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("Lookup = %v, want %v", got, want)
	}
	if got := a.Lookup("m", []int64{99, 1, 2}); got != nil {
		t.Fatalf("a prompt whose first block nobody holds matched %v", got)
	}
	if got := a.Lookup("unknown", seq(1, 8)); got != nil {
		t.Fatalf("unknown model matched %v", got)
	}
	var nilIndex *Approx
	if got := nilIndex.Lookup("m", seq(1, 8)); got != nil {
		t.Fatalf("nil index matched %v", got)
	}
}

func TestEntriesExpireAfterTTLUnlessUsedAgain(t *testing.T) {
	c := newClock()
	a := New(Config{CapacityTokens: 1600, TTL: time.Minute, BlockSize: 16}, twoEngines, c.now)
	a.Insert("A", seq(1, 4))
	a.Insert("A", seq(100, 2))
	c.advance(40 * time.Second)
	a.Insert("A", seq(1, 2)) // blocks 1 and 2 are used again
	c.advance(30 * time.Second)

	if got := a.Lookup("m", seq(1, 4)); !slices.Equal(got, []Match{{"A", 2}}) {
		t.Fatalf("after 70s Lookup = %v, want the two blocks used 30s ago", got)
	}
	if got := a.Lookup("m", seq(100, 2)); got != nil {
		t.Fatalf("expired prompt matched %v", got)
	}
	if n := a.Blocks("A"); n != 2 {
		t.Fatalf("Blocks = %d after expiry, want 2", n)
	}
	c.advance(time.Minute)
	if n := a.Blocks("A"); n != 0 {
		t.Fatalf("Blocks = %d after every entry expired, want 0", n)
	}
}

func TestZeroTTLKeepsEntriesUntilCapacityEvicts(t *testing.T) {
	c := newClock()
	a := New(Config{CapacityTokens: 64, BlockSize: 16}, twoEngines, c.now)
	a.Insert("A", seq(1, 4))
	c.advance(1000 * time.Hour)
	if got := a.Lookup("m", seq(1, 4)); !slices.Equal(got, []Match{{"A", 4}}) {
		t.Fatalf("Lookup = %v, want the whole prompt", got)
	}
}

func TestCapacityEvictsLeastRecentlyUsedTailsFirst(t *testing.T) {
	c := newClock()
	// Room for 6 blocks of 16 tokens (100 tokens round down to 6 blocks).
	a := New(Config{CapacityTokens: 100, TTL: time.Hour, BlockSize: 16}, twoEngines, c.now)
	if a.CapacityBlocks("A") != 6 {
		t.Fatalf("CapacityBlocks = %d, want 6", a.CapacityBlocks("A"))
	}
	a.Insert("A", seq(1, 4)) // prompt P: 1 2 3 4
	c.advance(time.Second)
	a.Insert("A", seq(10, 4)) // prompt Q evicts P's last two blocks
	if got := a.Lookup("m", seq(1, 4)); !slices.Equal(got, []Match{{"A", 2}}) {
		t.Fatalf("P after eviction = %v, want its first 2 blocks", got)
	}
	if got := a.Lookup("m", seq(10, 4)); !slices.Equal(got, []Match{{"A", 4}}) {
		t.Fatalf("Q = %v, want all 4 blocks", got)
	}
	if n := a.Blocks("A"); n != 6 {
		t.Fatalf("Blocks = %d, want the capacity 6", n)
	}
	// A prompt longer than the capacity keeps its leading blocks.
	a.Insert("B", seq(50, 20))
	if got := a.Lookup("m", seq(50, 20)); !slices.Equal(got, []Match{{"B", 6}}) {
		t.Fatalf("long prompt = %v, want its first 6 blocks", got)
	}
}

func TestCapacityIsAtLeastOneBlock(t *testing.T) {
	a := New(Config{CapacityTokens: 3, BlockSize: 16}, twoEngines, nil)
	if a.CapacityBlocks("A") != 1 {
		t.Fatalf("CapacityBlocks = %d, want 1", a.CapacityBlocks("A"))
	}
	if a.BlockSize() != 16 {
		t.Fatalf("BlockSize = %d", a.BlockSize())
	}
	if New(Config{}, nil, nil).BlockSize() != DefaultBlockSize {
		t.Fatal("a zero block size is not the default")
	}
}

func TestRemoveEngine(t *testing.T) {
	a := New(Config{CapacityTokens: 1600, BlockSize: 16}, twoEngines, nil)
	a.Insert("A", seq(1, 4))
	a.Insert("B", seq(1, 4))
	a.RemoveEngine("A")
	a.RemoveEngine("nobody")
	if got := a.Lookup("m", seq(1, 4)); !slices.Equal(got, []Match{{"B", 4}}) {
		t.Fatalf("Lookup = %v, want B only", got)
	}
	if !a.Has("A") || a.Has("nobody") || a.Blocks("nobody") != 0 {
		t.Fatal("Has or Blocks of engines is wrong")
	}
	a.Insert("A", seq(7, 1))
	if a.Blocks("A") != 1 {
		t.Fatal("a removed engine does not learn again")
	}
}

// TestSlabReuse churns one engine far past its capacity and checks that the slab never
// grows past it and the list stays consistent.
func TestSlabReuse(t *testing.T) {
	c := newClock()
	a := New(Config{CapacityTokens: 10 * 16, TTL: 5 * time.Second, BlockSize: 16}, twoEngines, c.now)
	for i := range 1000 {
		a.Insert("A", seq(i*3, 4))
		c.advance(time.Second)
	}
	l := a.members.Load().engines["A"]
	if len(l.nodes) > 10 || len(l.slots) > 10 {
		t.Fatalf("slab %d nodes, %d slots: grew past the capacity of 10", len(l.nodes), len(l.slots))
	}
	n := 0
	for i := l.head; i != nilNode; i = l.nodes[i].next {
		if l.slots[l.nodes[i].hash] != i {
			t.Fatalf("node %d is not its hash's slot", i)
		}
		n++
	}
	if n != len(l.slots) {
		t.Fatalf("list has %d nodes, map %d", n, len(l.slots))
	}
}

func TestConcurrentInsertAndLookup(t *testing.T) {
	a := New(Config{CapacityTokens: 64 * 16, TTL: time.Minute, BlockSize: 16}, twoEngines, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				a.Insert([]string{"A", "B"}[g%2], seq(i%50, 8))
				a.Lookup("m", seq(i%50, 8))
				a.Blocks("A")
			}
		})
	}
	wg.Wait()
	if a.Blocks("A") > 64 || a.Blocks("B") > 64 {
		t.Fatal("capacity exceeded")
	}
}

// TestAddAndDropEngines: an added engine is matched from its first insert, a dropped one
// never again, and the engines that stay keep what they hold.
func TestAddAndDropEngines(t *testing.T) {
	a := New(Config{CapacityTokens: 1 << 20}, []Engine{{ID: "A", Model: "m"}}, nil)
	a.Insert("A", []int64{1, 2})
	a.AddEngine(Engine{ID: "B", Model: "m"})
	a.AddEngine(Engine{ID: "A", Model: "m"}) // already tracked: keeps its entries
	a.Insert("B", []int64{1})
	if got := a.Lookup("m", []int64{1, 2}); len(got) != 2 || got[0] != (Match{Engine: "A", Blocks: 2}) || got[1] != (Match{Engine: "B", Blocks: 1}) {
		t.Fatalf("lookup with A and B: %+v", got)
	}
	a.DropEngine("A")
	a.Insert("A", []int64{1, 2})
	if got := a.Lookup("m", []int64{1, 2}); len(got) != 1 || got[0].Engine != "B" || a.Has("A") || a.Blocks("A") != 0 {
		t.Fatalf("lookup after dropping A: %+v", got)
	}
}
