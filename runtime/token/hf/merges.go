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
type mergeTable struct {
	words []uint32 // 3 per slot; a power-of-two number of slots, at most 70% full
	shift uint     // 64 - log2(number of slots)
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
	t := &mergeTable{words: make([]uint32, 3*size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
	for i := 2; i < len(t.words); i += 3 {
		t.words[i] = freeSlot
	}
	return t
}

// home is the slot where the search for key starts (Fibonacci hashing).
func (t *mergeTable) home(key uint64) uint64 { return key * 0x9E3779B97F4A7C15 >> t.shift }

// put sets the merge of key (a<<32 | b), val (rank<<32 | merged id), replacing an earlier
// one. The ids must be below maxID and the rank below maxRanks.
func (t *mergeTable) put(key, val uint64) {
	a, b, rank, c := uint32(key>>32), uint32(key), uint32(val>>32), uint32(val)
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
	mask := uint64(len(t.words)/3 - 1)
	for i := t.home(uint64(a)<<32 | uint64(b)); ; i = (i + 1) & mask {
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
