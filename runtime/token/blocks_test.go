package token

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

// hashCase is one entry of testdata/block_hashes.golden.json.
type hashCase struct {
	BlockSize int      `json:"block_size"`
	TokenIDs  []uint32 `json:"token_ids"`
	Hashes    []int64  `json:"hashes"`
}

// The golden values were written by testdata/sglang_block_hash.py, a transcription of
// SGLang's Python hash functions, never by the Go code under test.
func loadGolden(t *testing.T) ([]byte, []hashCase) {
	t.Helper()
	data, err := os.ReadFile("testdata/block_hashes.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []hashCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return data, cases
}

func TestBlockHashesGolden(t *testing.T) {
	_, cases := loadGolden(t)
	for _, c := range cases {
		got := BlockHashes(c.TokenIDs, c.BlockSize)
		if !slices.Equal(got, c.Hashes) {
			t.Errorf("block size %d, %d ids: got %v, want %v", c.BlockSize, len(c.TokenIDs), got, c.Hashes)
		}
	}
}

// TestGoldenMatchesPythonReference keeps the golden file honest: rerunning the reference
// script over its inputs must reproduce it byte for byte.
func TestGoldenMatchesPythonReference(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	golden, _ := loadGolden(t)
	cmd := exec.Command(python, "testdata/sglang_block_hash.py")
	cmd.Stdin = bytes.NewReader(golden)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference script: %v", err)
	}
	if !bytes.Equal(out, golden) {
		t.Fatalf("reference script output differs from the golden file:\n%s", out)
	}
}

func TestBlockHashesChain(t *testing.T) {
	ids := Encode("one two three four five six seven eight nine ten")
	all := BlockHashes(ids, 4)
	if len(all) != len(ids)/4 {
		t.Fatalf("got %d hashes for %d ids", len(all), len(ids))
	}
	// A block's hash depends on every block before it, and only on those.
	if got := BlockHashes(ids[:8], 4); !slices.Equal(got, all[:2]) {
		t.Fatalf("prefix hashes %v differ from %v", got, all[:2])
	}
	other := slices.Clone(ids)
	other[0]++
	if got := BlockHashes(other, 4); got[1] == all[1] {
		t.Fatal("changing block 0 did not change block 1's hash")
	}
}

// plainHashes is BlockHashes without the chain cache.
func plainHashes(ids []uint32, blockSize int) []int64 {
	hs, _ := hashBlocks(ids, blockSize, nil, nil)
	return hs
}

// TestChainCacheGrowth checks the chain cache against plain hashing for what it is for
// (a conversation grown turn by turn, across powers of two) and for what it must not be
// fooled by: a prompt that differs inside a remembered block, a shorter prompt, another
// page size, a prompt that shares only its start.
func TestChainCacheGrowth(t *testing.T) {
	c := newChainCache(DefaultChainBytes)
	check := func(name string, ids []uint32, bs int) {
		t.Helper()
		if got, want := c.hashes(ids, bs), plainHashes(ids, bs); !slices.Equal(got, want) {
			t.Fatalf("%s (%d ids, pages of %d): the chain cache's hashes differ from plain hashing", name, len(ids), bs)
		}
	}
	conv := make([]uint32, 0, 40000)
	for i := range 9000 {
		conv = append(conv, uint32(i*7919))
	}
	for turn := range 12 {
		for i := range 2500 + 37*turn {
			conv = append(conv, uint32(turn*100003+i))
		}
		check("grown", conv, 16)
	}
	check("the same again", conv, 16)
	check("other page size", conv, 1)
	check("shorter", conv[:len(conv)-1000], 16)
	edited := slices.Clone(conv)
	edited[len(edited)/2+3]++
	check("edited mid-block", edited, 16)
	check("original after edit", conv, 16)
	check("unaligned", conv[:len(conv)-5], 16)
	other := slices.Clone(conv[:2000])
	for i := range 20000 {
		other = append(other, uint32(i))
	}
	check("shared start", other, 16)
	check("original after shared start", conv, 16)
	if s := c.stats(); s.entries == 0 {
		t.Fatal("the chain cache remembered nothing")
	}
}

// TestChainCacheBound checks that the chain cache stays within its budget and does not
// keep a prompt larger than half of it.
// A conversation grown by a turn appends its new blocks to the arrays of the prompt it
// extends, without copying the prompt; a second prompt extending the same one copies.
func TestChainCacheGrowsInPlace(t *testing.T) {
	c := newChainCache(DefaultChainBytes)
	held := func(ids []uint32) *chain {
		t.Helper()
		if got, want := c.hashes(ids, 16), plainHashes(ids, 16); !slices.Equal(got, want) {
			t.Fatalf("%d ids: the chain cache's hashes differ from plain hashing", len(ids))
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range c.entries {
			if len(e.ids) == len(ids)/16*16 && slices.Equal(e.ids, ids[:len(e.ids)]) {
				return e
			}
		}
		t.Fatalf("%d ids: not remembered", len(ids))
		return nil
	}
	conv := make([]uint32, 0, 20000)
	for i := range 9000 {
		conv = append(conv, uint32(i*7919))
	}
	first := held(conv)
	grown := held(append(conv, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17))
	if unsafe.SliceData(grown.ids) != unsafe.SliceData(first.ids) || unsafe.SliceData(grown.digests) != unsafe.SliceData(first.digests) {
		t.Error("the grown prompt copied the prompt it extends")
	}
	other := held(append(slices.Clone(conv), 99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89, 88, 87, 86, 85, 84))
	if unsafe.SliceData(other.ids) == unsafe.SliceData(first.ids) {
		t.Error("a second prompt extending the same one wrote into its arrays")
	}
	held(append(conv, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17))
}

// A prompt that extends one of the last remembered prompts under the same longest span
// finds it without hashing its ids for keys, and takes its key, which must be the one
// hashing would give; anything else (an id changed anywhere in the remembered part, a
// longer span, another page size) finds nothing there.
func TestChainCacheRecentPrefix(t *testing.T) {
	c := newChainCache(DefaultChainBytes)
	conv := make([]uint32, 0, 40000)
	for i := range 9000 {
		conv = append(conv, uint32(i*7919))
	}
	c.hashes(conv, 16)
	grown := append(slices.Clone(conv), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
	prev, key := c.recentPrefix(grown, 16, longestSpan(len(grown)/16))
	if prev == nil || len(prev.ids) != len(conv)/16*16 {
		t.Fatal("a prompt grown by a block did not find the prompt it extends")
	}
	if keys := c.keys(grown, 16); key != keys[len(keys)-1] {
		t.Fatalf("key %+v, hashing gives %+v", key, keys[len(keys)-1])
	}
	for name, ids := range map[string][]uint32{
		"first id changed":       append([]uint32{grown[0] + 1}, grown[1:]...),
		"middle id changed":      slices.Concat(grown[:4000], []uint32{grown[4000] + 1}, grown[4001:]),
		"last shared id changed": slices.Concat(grown[:len(conv)/16*16-1], []uint32{0}, grown[len(conv)/16*16:]),
		"crossed a power of two": append(slices.Clone(conv), make([]uint32, 16*1024)...),
	} {
		n := len(ids) / 16
		if prev, _ := c.recentPrefix(ids[:n*16], 16, longestSpan(n)); prev != nil {
			t.Errorf("%s: found a remembered prefix", name)
		}
		if got, want := c.hashes(ids, 16), plainHashes(ids, 16); !slices.Equal(got, want) {
			t.Errorf("%s: the chain cache's hashes differ from plain hashing", name)
		}
	}
	if prev, _ := c.recentPrefix(grown, 1, longestSpan(len(grown))); prev != nil {
		t.Error("pages of 1 found a prompt remembered with pages of 16")
	}
}

// Conversations grown and branched from the same history at once each get their own
// hashes: a prompt appending in place never writes where another reads (run with -race).
func TestChainCacheConcurrentGrowth(t *testing.T) {
	c := newChainCache(DefaultChainBytes)
	history := make([]uint32, 9000)
	for i := range history {
		history[i] = uint32(i * 7919)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			conv := slices.Clone(history)
			for turn := range 6 {
				for i := range 100 + 17*g {
					conv = append(conv, uint32(g<<24|turn<<16|i))
				}
				if got, want := c.hashes(conv, 16), plainHashes(conv, 16); !slices.Equal(got, want) {
					t.Errorf("conversation %d, turn %d: the chain cache's hashes differ from plain hashing", g, turn)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestChainCacheBound(t *testing.T) {
	const budget = 1 << 20
	c := newChainCache(budget)
	for p := range 50 {
		ids := make([]uint32, MinChainTokens+p*97)
		for i := range ids {
			ids[i] = uint32(p<<20 + i)
		}
		c.hashes(ids, 16)
		if s := c.stats(); s.bytes > budget || s.entries != len(c.order) {
			t.Fatalf("after %d prompts: %+v held, %d in order, over a budget of %d", p+1, s, len(c.order), budget)
		}
	}
	huge := make([]uint32, budget/4)
	c.hashes(huge, 16)
	for _, e := range c.entries {
		if len(e.ids) == len(huge) {
			t.Fatal("a prompt larger than half the budget was kept")
		}
	}
}

// FuzzChainCache hashes a remembered prompt and then a variation of it (grown, cut,
// edited), with the chain cache and without: every hash must be the same.
func FuzzChainCache(f *testing.F) {
	f.Add(uint16(9000), uint16(300), uint16(0), uint32(0), uint8(16))
	f.Add(uint16(20000), uint16(0), uint16(5000), uint32(1), uint8(1))
	f.Add(uint16(16384), uint16(4000), uint16(16383), uint32(7), uint8(32))
	f.Fuzz(func(t *testing.T, base, grow, edit uint16, delta uint32, bs uint8) {
		if bs == 0 {
			return
		}
		c := newChainCache(DefaultChainBytes)
		ids := make([]uint32, int(base)+int(grow))
		for i := range ids {
			ids[i] = uint32(i * 2654435761)
		}
		first := ids[:base]
		if got, want := c.hashes(first, int(bs)), plainHashes(first, int(bs)); !slices.Equal(got, want) {
			t.Fatal("first prompt: hashes differ from plain hashing")
		}
		if int(edit) < len(ids) {
			ids[edit] += delta
		}
		if got, want := c.hashes(ids, int(bs)), plainHashes(ids, int(bs)); !slices.Equal(got, want) {
			t.Fatal("second prompt: hashes differ from plain hashing")
		}
		// A third prompt extends the first otherwise: the second may have grown into the
		// first's arrays, and neither may see the other's blocks.
		third := slices.Clone(first)
		for i := range int(grow) {
			third = append(third, uint32(i)^delta)
		}
		if got, want := c.hashes(third, int(bs)), plainHashes(third, int(bs)); !slices.Equal(got, want) {
			t.Fatal("third prompt: hashes differ from plain hashing")
		}
		for name, p := range map[string][]uint32{"first": first, "second": ids, "third": third} {
			if got, want := c.hashes(p, int(bs)), plainHashes(p, int(bs)); !slices.Equal(got, want) {
				t.Fatalf("%s prompt again: hashes differ from plain hashing", name)
			}
		}
	})
}

// chainStats are what a chain cache holds.
type chainStats struct{ entries, bytes int }

func (c *chainCache) stats() chainStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return chainStats{len(c.entries), c.held}
}

// BenchmarkChainGrowth is the chain cache under a 128k-token conversation: grown by a turn
// of 300 new ids per request (32 turns, then again from the history, as bench/proxy's
// long_grow kind), and branched (the history and one new turn per request, as
// runtime/server's BenchmarkGrowTurn). Each op hashes one prompt with ReadBlockHashes.
func BenchmarkChainGrowth(b *testing.B) {
	history := make([]uint32, 133_000)
	for i := range history {
		history[i] = uint32(i * 2654435761)
	}
	for _, c := range []struct {
		name     string
		turnsCap int
	}{{"grown", 32}, {"branched", 1}} {
		b.Run(c.name, func(b *testing.B) {
			ids := slices.Clone(history)
			ReadBlockHashes(ids, 16)
			b.SetBytes(int64(4 * len(ids)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if n%c.turnsCap == 0 {
					ids = ids[:len(history)]
				}
				n++
				for i := range 300 {
					ids = append(ids, uint32(n<<16+i))
				}
				ReadBlockHashes(ids, 16)
			}
		})
	}
}
