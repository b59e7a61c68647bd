package hf

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestMergeHeapMatchesScan runs both merge loops on the same pre-tokens: the scan is used
// below heapMin bytes and the heap from there on, so each checks the other.
func TestMergeHeapMatchesScan(t *testing.T) {
	m := loadQwen(t).model
	words := []string{"hello", " world", "aaaaaaaa", "    ", "Pneumonoultramicroscopicsilicovolcanoconiosis", "你好世界", "😀👍🏽", "\xff\xfe"}
	r := rand.New(rand.NewPCG(1, 2))
	base := len(words)
	for range 300 {
		var b strings.Builder
		for n := 1 + r.IntN(12); n > 0; n-- {
			b.WriteString(words[r.IntN(base)])
		}
		words = append(words, b.String())
	}
	var buf bpeBuf
	for _, w := range words {
		heap := m.mergeHeap(nil, w, &buf)
		syms := buf.syms[:0]
		for i := 0; i < len(w); i++ {
			syms = append(syms, m.byteID[w[i]])
		}
		scan := scanMerge(m, syms)
		if !slices.Equal(heap, scan) {
			t.Fatalf("merges of %q: heap %v, scan %v", w, heap, scan)
		}
	}
}

// scanMerge is the textbook statement of BPE by rank, independent of merge's
// bookkeeping: merge the leftmost pair of lowest rank until none has a merge.
func scanMerge(m *model, syms []uint32) []uint32 {
	syms = slices.Clone(syms)
	for {
		best, bi := uint64(noMerge), -1
		for i := 0; i+1 < len(syms); i++ {
			if v := m.pair(syms[i], syms[i+1]); v>>32 < best>>32 {
				best, bi = v, i
			}
		}
		if bi < 0 {
			return syms
		}
		syms = slices.Replace(syms, bi, bi+2, uint32(best))
	}
}

func TestMergeScanMatchesReference(t *testing.T) {
	m := loadQwen(t).model
	var buf bpeBuf
	for _, w := range []string{"hello", " tokenization", "aaaaaaaaaaaaaaaaaaaa", "   \n\n", "你好", "ab" + strings.Repeat("xy", 20)} {
		syms := make([]uint32, 0, len(w))
		for i := 0; i < len(w); i++ {
			syms = append(syms, m.byteID[w[i]])
		}
		if got, want := m.merge(nil, w, &buf), scanMerge(m, syms); !slices.Equal(got, want) {
			t.Errorf("merge(%q) = %v, want %v", w, got, want)
		}
	}
}

// TestEncodeConcurrent encodes from several goroutines at once (run with -race) and
// checks every result against a sequential encoding without the cache.
func TestEncodeConcurrent(t *testing.T) {
	tok := loadQwen(t)
	cases := loadGoldens(t)
	ref := uncached(tok)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range cases {
				c := cases[(i+g*37)%len(cases)]
				if got := tok.Encode(c.Text, false); !slices.Equal(got, ref.Encode(c.Text, false)) {
					t.Errorf("concurrent Encode(%q) = %v", c.Text, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestEncodeInvalidUTF8 encodes invalid bytes one by one, and decodes them to U+FFFD.
func TestEncodeInvalidUTF8(t *testing.T) {
	tok := loadQwen(t)
	m := tok.model
	ids := tok.Encode("a\xffb", false)
	if want := []uint32{m.byteID['a'], m.byteID[0xff], m.byteID['b']}; !slices.Equal(ids, want) {
		t.Errorf("Encode(a\\xffb) = %v, want %v", ids, want)
	}
	if got, err := tok.Decode(ids); err != nil || got != "a\ufffdb" {
		t.Errorf("Decode = %q, %v, want a\\ufffdb", got, err)
	}
}

func TestCacheBounds(t *testing.T) {
	c := newCache()
	for i := range cacheShards * shardEntries * 3 {
		key := strings.Repeat("k", i%7+1) + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if len(key) > maxCachedKey {
			key = key[:maxCachedKey]
		}
		c.put(key, []uint32{uint32(i), 1, 2, 3, 4}[:1+i%5])
	}
	for i := range c.shards {
		s := &c.shards[i]
		if len(s.slots) > shardEntries || len(s.index) != len(s.slots) {
			t.Fatalf("shard %d: %d slots, %d index entries, want at most %d of each", i, len(s.slots), len(s.index), shardEntries)
		}
		for k, j := range s.index {
			if s.slots[j].key != k {
				t.Fatalf("shard %d: index says %q is in slot %d, which holds %q", i, k, j, s.slots[j].key)
			}
		}
	}
	long := strings.Repeat("z", maxCachedKey+1)
	c.put(long, []uint32{7})
	if _, ok := c.get(nil, long); ok {
		t.Error("a key longer than maxCachedKey was cached")
	}
	c.put("short", []uint32{1, 2, 3, 4})
	if got, ok := c.get([]uint32{9}, "short"); !ok || !slices.Equal(got, []uint32{9, 1, 2, 3, 4}) {
		t.Errorf("get(short) = %v, %v, want [9 1 2 3 4], true", got, ok)
	}
}
