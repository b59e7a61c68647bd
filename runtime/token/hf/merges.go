package hf

import "math/bits"

// mergeTable maps a pair of ids to its merge (rank<<32 | merged id). It is an
// open-addressing hash table with linear probing over one array, several times faster
// than a Go map for these lookups, which dominate encoding without the cache.
//
// A slot is three 32-bit words: the pair's ids and the merged id in their low 24 bits
// (ids are below maxID) and the rank's three bytes in their top 8. That is 12 bytes where
// a 64-bit key and value took 16: Qwen's table is 3.1 MB instead of 4.2, and each MB the
// tokenizer keeps costs the router 1.1 to 2.2 MB of resident memory once the collector's
// headroom is counted (runtime/gcpace; docs/benchmarks.md, "Memory with Qwen3").
//
// Most pairs looked up have no merge, such as two neighbouring CJK letters, and on text
// never seen such a lookup is a miss in the processor's caches that walks several slots.
// A Bloom filter of the pairs (filter, 8 bits a merge: 256 KB for Qwen, which stays in
// the processor's cache where the 3.1 MB table cannot) answers most of them without
// the table: a pair it does not hold has no merge.
type mergeTable struct {
	words []uint32 // 3 per slot; a power-of-two number of slots, at most 70% full
	shift uint     // 64 - log2(number of slots)
	// filter has two bits set, in one word, for each pair put; fshift is 64 -
	// log2(len(filter)).
	filter []uint64
	fshift uint
}

// maxRanks bounds the number of merges, so that no slot's third word is freeSlot; real
// files have under 300 000.
const (
	maxRanks = 0xFF << 16
	idMask   = maxID - 1
	freeSlot = ^uint32(0) // the third word of a free slot
)

func newMergeTable(n int) *mergeTable {
	size := 1 << bits.Len(uint(n*10/7+1))
	fsize := 1 << bits.Len(uint(n/8)) // words of 64 bits: at least 8 bits a merge
	t := &mergeTable{words: make([]uint32, 3*size), shift: uint(64 - bits.TrailingZeros(uint(size))),
		filter: make([]uint64, fsize), fshift: uint(64 - bits.TrailingZeros(uint(fsize)))}
	for i := 2; i < len(t.words); i += 3 {
		t.words[i] = freeSlot
	}
	return t
}

// home is the slot where the search for key starts (Fibonacci hashing).
func (t *mergeTable) home(key uint64) uint64 { return key * 0x9E3779B97F4A7C15 >> t.shift }

// filterBits returns the word of the filter that holds key and the bits key sets in it.
// They are taken from the top of a product, whose bits depend on all of key's; a
// filter of one word (fshift 64) uses word 0.
func (t *mergeTable) filterBits(key uint64) (int, uint64) {
	h := key * 0xC2B2AE3D27D4EB4F
	return int(h >> t.fshift & uint64(len(t.filter)-1)), 1<<(h>>(t.fshift-6)&63) | 1<<(h>>(t.fshift-12)&63)
}

// put sets the merge of key (a<<32 | b), val (rank<<32 | merged id), replacing an earlier
// one. The ids must be below maxID and the rank below maxRanks.
func (t *mergeTable) put(key, val uint64) {
	a, b, rank, c := uint32(key>>32), uint32(key), uint32(val>>32), uint32(val)
	w, set := t.filterBits(key)
	t.filter[w] |= set
	mask := uint64(len(t.words)/3 - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		w := t.words[3*i : 3*i+3 : 3*i+3]
		if w[2] == freeSlot || w[0]&idMask == a && w[1]&idMask == b {
			w[0], w[1], w[2] = a|rank<<24, b|rank>>8<<24, c|rank>>16<<24
			return
		}
	}
}

// get returns the merge of the pair (a, b), or noMerge.
func (t *mergeTable) get(a, b uint32) uint64 {
	key := uint64(a)<<32 | uint64(b)
	if w, set := t.filterBits(key); t.filter[w]&set != set {
		return noMerge
	}
	mask := uint64(len(t.words)/3 - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		w := t.words[3*i : 3*i+3 : 3*i+3]
		if w[2] == freeSlot {
			return noMerge
		}
		if w[0]&idMask == a && w[1]&idMask == b {
			return slotValue(w)
		}
	}
}

// slotValue is the merge a used slot holds, rank<<32 | merged id.
func slotValue(w []uint32) uint64 {
	rank := w[0]>>24 | w[1]>>24<<8 | w[2]>>24<<16
	return uint64(rank)<<32 | uint64(w[2]&idMask)
}

// each calls f with every merge in the table, as put was given it.
func (t *mergeTable) each(f func(key, val uint64)) {
	for i := 0; i < len(t.words); i += 3 {
		if w := t.words[i : i+3 : i+3]; w[2] != freeSlot {
			f(uint64(w[0]&idMask)<<32|uint64(w[1]&idMask), slotValue(w))
		}
	}
}
