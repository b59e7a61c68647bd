package hf

import (
	"hash/maphash"
	"math/bits"
)

// wholeTable finds the pre-tokens that are one token, most of a prose text's words: a
// lookup costs a hash and a comparison where merging costs a lookup in the merge table
// per byte and per merge, and it takes no pre-token cache entry, so that text never seen
// before runs at nearly the speed of cached text.
//
// It holds the vocabulary entries whose bytes merge into the entry itself, as merge
// tells for each entry when the model is built, so a hit is the id merge would give;
// an entry that merges into several tokens is left out. With ignore_merges it holds
// every entry, as tokenizers then looks a pre-token up in the vocabulary before merging.
type wholeTable struct {
	seed maphash.Seed
	// slots hold an entry each, or 0 for a free slot (no entry starts at 0: blob
	// begins with one unused byte): its id in the low 24 bits, its length in the next
	// 12 and its start in blob in the top 28.
	slots []uint64
	blob  []byte // the entries' bytes: the decoder's blob, shared
	mask  uint64
}

// maxWhole is the length of the longest entry kept and maxWholeBlob the bound of the
// blob's offsets, for the 12 and 28 bits of a slot; ids are below maxID, 24 bits.
const (
	maxWhole     = 1<<12 - 1
	maxWholeBlob = 1 << 28
)

// newWholeTable returns a table for n entries of blob, which must not change while the
// table is in use.
func newWholeTable(n int, blob []byte) *wholeTable {
	size := 1 << bits.Len(uint(n*10/7)) // at most 70% full
	return &wholeTable{seed: maphash.MakeSeed(), slots: make([]uint64, size), blob: blob, mask: uint64(size - 1)}
}

// put adds the entry of n bytes at start in the blob with its id; the entry must not be
// in the table yet. It reports false, having added nothing, for an entry that is empty,
// starts at 0 or is beyond the table's bounds.
func (w *wholeTable) put(start, n int, id uint32) bool {
	if n == 0 || n > maxWhole || start == 0 || start+n > maxWholeBlob || start+n > len(w.blob) {
		return false
	}
	slot := uint64(start)<<36 | uint64(n)<<24 | uint64(id)
	for i := maphash.Bytes(w.seed, w.blob[start:start+n]) & w.mask; ; i = (i + 1) & w.mask {
		if w.slots[i] == 0 {
			w.slots[i] = slot
			return true
		}
	}
}

// get returns the id of the entry p, if p is one.
func (w *wholeTable) get(p string) (uint32, bool) {
	if len(p) > maxWhole {
		return 0, false
	}
	for i := maphash.String(w.seed, p) & w.mask; ; i = (i + 1) & w.mask {
		s := w.slots[i]
		if s == 0 {
			return 0, false
		}
		if n := int(s >> 24 & maxWhole); n == len(p) {
			if start := int(s >> 36); string(w.blob[start:start+n]) == p {
				return uint32(s & (1<<24 - 1)), true
			}
		}
	}
}
