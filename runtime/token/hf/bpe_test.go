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
		heap, _ := m.mergeHeap(nil, w, &buf, nil)
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
		if got, want := m.mergeScan(nil, w, &buf), scanMerge(m, syms); !slices.Equal(got, want) {
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
				if got := tok.encodeAll(c.Text, false); !slices.Equal(got, ref.encodeAll(c.Text, false)) {
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
	ids := tok.encodeAll("a\xffb", false)
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
		key := strings.Repeat("k", i%7+minCachedKey) + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if len(key) > maxCachedKey {
			key = key[:maxCachedKey]
		}
		for range 2 { // cached on its second miss
			c.put(key, c.hash(key), []uint32{uint32(i), 1, 2, 3, 4}[:1+i%5])
		}
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
	for _, key := range []string{strings.Repeat("z", maxCachedKey+1), strings.Repeat("s", minCachedKey-1)} {
		h := c.hash(key)
		c.put(key, h, []uint32{7})
		c.put(key, h, []uint32{7})
		if _, ok := c.get(nil, key, h); ok {
			t.Errorf("a key of %d bytes was cached, outside [minCachedKey, maxCachedKey]", len(key))
		}
	}
	for _, tc := range []struct {
		key    string
		cached bool
	}{
		{strings.Repeat("海", cjkRunChars), false},          // a run of CJK letters
		{"，" + strings.Repeat("カ", cjkRunChars), false},    // after a mark, kana
		{strings.Repeat("海", cjkRunChars-1), true},         // too short a run to skip
		{strings.Repeat("한", cjkRunChars), true},           // Hangul, whose words have spaces
		{strings.Repeat("海", cjkRunChars-1) + "xyz", true}, // not ending in the run
	} {
		h := c.hash(tc.key)
		c.put(tc.key, h, []uint32{7})
		c.put(tc.key, h, []uint32{7})
		if _, ok := c.get(nil, tc.key, h); ok != tc.cached {
			t.Errorf("%q cached after two misses: %v, want %v", tc.key, ok, tc.cached)
		}
	}
	kept := strings.Repeat("q", minCachedKey)
	h := c.hash(kept)
	c.put(kept, h, []uint32{1, 2, 3, 4})
	if _, ok := c.get(nil, kept, h); ok {
		t.Errorf("%q was cached on its first miss", kept)
	}
	c.put(kept, h, []uint32{1, 2, 3, 4})
	if got, ok := c.get([]uint32{9}, kept, h); !ok || !slices.Equal(got, []uint32{9, 1, 2, 3, 4}) {
		t.Errorf("get(%q) after its second miss = %v, %v, want [9 1 2 3 4], true", kept, got, ok)
	}
}

// TestMergeRanksMatchesHeap runs mergeRanks, mergeRuns (where it applies) and mergeHeap
// on the same pre-tokens, long runs of one or a few repeated characters among them (the
// whitespace runs these are for), and the scan on those short enough for it: Qwen's
// vocabulary is monotone, so merge uses mergeRuns or mergeRanks, and their ids must be
// the heap's.
func TestMergeRanksMatchesHeap(t *testing.T) {
	m := loadQwen(t).model
	if !m.monotone {
		t.Fatal("Qwen's merges are not found monotone: merge would not use mergeRanks")
	}
	var words []string
	for _, n := range []int{64, 65, 127, 128, 129, 255, 1000, 4097, 70000} {
		for _, unit := range []string{" ", "\n", "\t", " \n", "a", ".", "ab", "=-", "你", "  \t", "0"} {
			words = append(words, strings.Repeat(unit, n/len(unit)+1))
		}
		// A few runs of one byte each, as mergeRuns takes them.
		words = append(words, strings.Repeat(" ", n)+"\n\n"+strings.Repeat(" ", n/3)+"\t"+strings.Repeat("=", n/2),
			"--"+strings.Repeat(" ", n)+"a", strings.Repeat("\n", n/2)+strings.Repeat(" ", n))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		alphabet := []string{" ", "\n", "a", "e", "t", "你", "\xff", "0", ".", "Ġ"}[:2+r.IntN(8)]
		var b strings.Builder
		for n := heapMin + r.IntN(3000); b.Len() < n; {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		words = append(words, b.String())
	}
	var buf bpeBuf
	runs := 0
	for _, w := range words {
		ranks, err := m.mergeRanks(nil, w, &buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		heap, _ := m.mergeHeap(nil, w, &buf, nil)
		if !slices.Equal(ranks, heap) {
			t.Fatalf("merges of %q (%d bytes):\nranks %v\n heap %v", w[:min(len(w), 40)], len(w), ranks, heap)
		}
		if out, ok := m.mergeRuns(nil, w, &buf); ok {
			runs++
			if !slices.Equal(out, heap) {
				t.Fatalf("merges of %q (%d bytes):\nruns %v\nheap %v", w[:min(len(w), 40)], len(w), out, heap)
			}
		}
		if len(w) <= 1200 {
			syms := make([]uint32, len(w))
			for i := range len(w) {
				syms[i] = m.byteID[w[i]]
			}
			if scan := scanMerge(m, syms); !slices.Equal(ranks, scan) {
				t.Fatalf("merges of %q: ranks %v, scan %v", w, ranks, scan)
			}
		}
	}
	if runs < 80 {
		t.Fatalf("mergeRuns applied to %d of the pre-tokens, want at least 80", runs)
	}
	for i, h := range buf.head {
		if h != -1 {
			t.Fatalf("rank %d's bucket still holds item %d after the merges", i, h)
		}
	}
}

// TestMergeNotMonotone: a merge list where a merge uses a token that a later-ranked
// merge makes is not monotone, and merge gives the heap's (and the scan's) ids for it,
// which mergeRanks would not.
func TestMergeNotMonotone(t *testing.T) {
	const a, b, ab, aba = 1, 2, 3, 4
	m := &model{merges: newMergeTable(2), ranks: 2}
	for i := range m.byteID {
		m.byteID[i] = uint32(100 + i)
	}
	m.byteID['a'], m.byteID['b'] = a, b
	m.merges.put(ab<<32|a, 0<<32|aba) // uses ab, made by the merge of rank 1
	m.merges.put(a<<32|b, 1<<32|ab)
	if m.merges.isMonotone() {
		t.Fatal("a merge of rank 0 uses the token a merge of rank 1 makes, yet the table is found monotone")
	}
	w := strings.Repeat("ab", heapMin)
	syms := make([]uint32, len(w))
	for i := range len(w) {
		syms[i] = m.byteID[w[i]]
	}
	want := scanMerge(m, syms)
	got, err := m.merge(nil, w, &bpeBuf{}, nil)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("merge(%q) = %v, %v; want %v", w, got, err, want)
	}
	if wrong, _ := m.mergeRanks(nil, w, &bpeBuf{}, nil); slices.Equal(wrong, want) {
		t.Fatal("mergeRanks gets this non-monotone list right: the test no longer shows why merge must not use it")
	}
}

// FuzzMerge compares the merge loops on a pre-token built from the fuzzer's bytes: s
// repeated to ranksMin bytes or more, each byte of s stretched to n%1024+1 copies, so
// that long runs of one byte (for mergeRuns) and long mixed pre-tokens (for mergeRanks)
// both come up. Their ids must be mergeHeap's.
func FuzzMerge(f *testing.F) {
	for _, s := range []string{" ", "  \n", "ab", "你好", "=-=", "\t \r\n"} {
		f.Add(s, uint16(1))
		f.Add(s, uint16(300))
	}
	m := loadQwen(f).model
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		if s == "" {
			return
		}
		s = s[:min(len(s), 64)] // at most 64 KiB a round below
		var b strings.Builder
		for b.Len() < ranksMin {
			for i := range len(s) {
				b.WriteString(strings.Repeat(s[i:i+1], int(n%1024)+1))
			}
		}
		w := b.String()
		var buf bpeBuf
		heap, _ := m.mergeHeap(nil, w, &buf, nil)
		if ranks, _ := m.mergeRanks(nil, w, &buf, nil); !slices.Equal(ranks, heap) {
			t.Fatalf("merges of %q: mergeRanks %v, mergeHeap %v", w, ranks, heap)
		}
		if runs, ok := m.mergeRuns(nil, w, &buf); ok && !slices.Equal(runs, heap) {
			t.Fatalf("merges of %q: mergeRuns %v, mergeHeap %v", w, runs, heap)
		}
	})
}

// TestMergeRunsGivesUp: with a vocabulary whose merges eat a run one byte a sweep, the
// runs' sweeps would cost more than runsWork runs a byte, and mergeRuns hands the
// pre-token back; merge still gives the scan's ids.
func TestMergeRunsGivesUp(t *testing.T) {
	const x, y, z = 1, 2, 3
	m := &model{merges: newMergeTable(49), ranks: 49}
	for i := range m.byteID {
		m.byteID[i] = uint32(100 + i)
	}
	m.byteID['x'], m.byteID['y'], m.byteID['z'] = x, y, z
	m.merges.put(x<<32|y, 0<<32|10) // xy
	for i := uint64(1); i < 49; i++ {
		m.merges.put(x<<32|(9+i), i<<32|(10+i)) // x, then the last merge's token
	}
	if m.monotone = m.merges.isMonotone(); !m.monotone {
		t.Fatal("a chain of merges, each using the token the one before made, is found not monotone")
	}
	// 64 bytes in 16 runs; each of 49 sweeps looks at 16 runs, 12 a byte.
	w := strings.Repeat("x", 49) + strings.Repeat("yz", 7) + "y"
	if _, ok := m.mergeRuns(nil, w, &bpeBuf{}); ok {
		t.Fatalf("mergeRuns did %d runs a byte of sweeps; want it to give up past %d", 49*16/len(w), runsWork)
	}
	syms := make([]uint32, len(w))
	for i := range len(w) {
		syms[i] = m.byteID[w[i]]
	}
	if got, err := m.merge(nil, w, &bpeBuf{}, nil); err != nil || !slices.Equal(got, scanMerge(m, syms)) {
		t.Fatalf("merge(%q) = %v, %v; want the scan's %v", w, got, err, scanMerge(m, syms))
	}
}
