package hf

import "math/bits"

// mergeTable maps a pair of ids to its merge (rank<<32 | merged id). It is an
// open-addressing hash table with linear probing over one array, several times faster
// than a Go map for these lookups, which dominate encoding without the cache.
type mergeTable struct {
	slots []mergeSlot // power-of-two length, at most 70% full
	shift uint        // 64 - log2(len(slots))
}

type mergeSlot struct{ key, val uint64 }

// emptyKey marks a free slot; no pair has it, since ids stay below maxID.
const emptyKey = ^uint64(0)

func newMergeTable(n int) *mergeTable {
	size := 1 << bits.Len(uint(n*10/7+1))
	t := &mergeTable{slots: make([]mergeSlot, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
	for i := range t.slots {
		t.slots[i].key = emptyKey
	}
	return t
}

// home is the slot where the search for key starts (Fibonacci hashing).
func (t *mergeTable) home(key uint64) uint64 { return key * 0x9E3779B97F4A7C15 >> t.shift }

// put sets the merge of key, replacing an earlier one.
func (t *mergeTable) put(key, val uint64) {
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == emptyKey || s.key == key {
			s.key, s.val = key, val
			return
		}
	}
}

// get returns the merge of the pair (a, b), or noMerge.
func (t *mergeTable) get(a, b uint32) uint64 {
	key := uint64(a)<<32 | uint64(b)
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == key {
			return s.val
		}
		if s.key == emptyKey {
			return noMerge
		}
	}
}

// each calls f with the key (a<<32 | b) and value (rank<<32 | merged id) of every merge.
func (t *mergeTable) each(f func(key, val uint64)) {
	for _, s := range t.slots {
		if s.key != emptyKey {
			f(s.key, s.val)
		}
	}
}
