package hf

import "math"

// noMerge is the merge value of a pair that has no merge.
const noMerge = math.MaxUint64

// heapMin is the pre-token length from which merge uses a heap: below it, rescanning the
// pairs for the lowest rank is faster; above it, rescanning would be quadratic.
const heapMin = 64

// model is a byte-level BPE model over raw bytes: the vocabulary's byte-level strings are
// turned back into the bytes they stand for at load time.
type model struct {
	byteID [256]uint32 // id of each single byte
	// merges maps a pair of ids to rank<<32 | merged id, so that comparing values
	// compares ranks.
	merges       *mergeTable
	ignoreMerges bool
	vocab        map[string]uint32 // bytes -> id; only filled for ignoreMerges
}

func (m *model) pair(a, b uint32) uint64 { return m.merges.get(a, b) }

// bpeBuf is merge's scratch space.
type bpeBuf struct {
	syms []uint32
	vals []uint64
	next []int32
	prev []int32
	heap []heapItem
}

// merge appends the ids of the pre-token p to dst: starting from its bytes, it merges the
// pair of lowest merge rank, the leftmost among equals, until no pair has a merge. This is
// the order of the tokenizers crate's heap (Word::merge_all).
func (m *model) merge(dst []uint32, p string, b *bpeBuf) []uint32 {
	if len(p) >= heapMin {
		return m.mergeHeap(dst, p, b)
	}
	syms := b.syms[:0]
	for i := 0; i < len(p); i++ {
		syms = append(syms, m.byteID[p[i]])
	}
	vals := b.vals[:0]
	for i := 0; i+1 < len(syms); i++ {
		vals = append(vals, m.pair(syms[i], syms[i+1]))
	}
	for {
		best, bi := uint64(noMerge), -1
		for i, v := range vals {
			if v < best {
				best, bi = v, i
			}
		}
		if bi < 0 {
			break
		}
		syms[bi] = uint32(best)
		syms = append(syms[:bi+1], syms[bi+2:]...)
		vals = append(vals[:bi], vals[bi+1:]...)
		if bi > 0 {
			vals[bi-1] = m.pair(syms[bi-1], syms[bi])
		}
		if bi < len(vals) {
			vals[bi] = m.pair(syms[bi], syms[bi+1])
		}
	}
	b.syms, b.vals = syms, vals
	return append(dst, syms...)
}

// heapItem is a candidate merge of the symbol at pos with its right neighbour.
type heapItem struct {
	val uint64 // rank<<32 | merged id
	pos int32
}

func (h heapItem) less(o heapItem) bool {
	return h.val>>32 < o.val>>32 || h.val>>32 == o.val>>32 && h.pos < o.pos
}

// mergeHeap is merge for long pre-tokens in O(n log n): symbols form a linked list over
// the byte positions, and candidate merges wait in a min-heap ordered by (rank, position).
// Entries made stale by an earlier merge are recognised and dropped when popped.
func (m *model) mergeHeap(dst []uint32, p string, b *bpeBuf) []uint32 {
	n := len(p)
	syms, next, prev := b.syms[:0], b.next[:0], b.prev[:0]
	for i := range n {
		syms = append(syms, m.byteID[p[i]])
		next = append(next, int32(i+1))
		prev = append(prev, int32(i-1))
	}
	next[n-1] = -1
	h := b.heap[:0]
	for i := 0; i+1 < n; i++ {
		if v := m.pair(syms[i], syms[i+1]); v != noMerge {
			h = heapPush(h, heapItem{v, int32(i)})
		}
	}
	for len(h) > 0 {
		var top heapItem
		top, h = heapPop(h)
		i := top.pos
		j := next[i]
		if syms[i] == math.MaxUint32 || j < 0 || m.pair(syms[i], syms[j]) != top.val {
			continue // stale: i was merged away, or a neighbour changed
		}
		syms[i] = uint32(top.val)
		syms[j] = math.MaxUint32
		next[i] = next[j]
		if k := next[j]; k >= 0 {
			prev[k] = i
			if v := m.pair(syms[i], syms[k]); v != noMerge {
				h = heapPush(h, heapItem{v, i})
			}
		}
		if k := prev[i]; k >= 0 {
			if v := m.pair(syms[k], syms[i]); v != noMerge {
				h = heapPush(h, heapItem{v, k})
			}
		}
	}
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, syms[i])
	}
	b.syms, b.next, b.prev, b.heap = syms, next, prev, h
	return dst
}

func heapPush(h []heapItem, it heapItem) []heapItem {
	h = append(h, it)
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h[i].less(h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	return h
}

func heapPop(h []heapItem) (heapItem, []heapItem) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, small := 2*i+1, 2*i+2, i
		if l < last && h[l].less(h[small]) {
			small = l
		}
		if r < last && h[r].less(h[small]) {
			small = r
		}
		if small == i {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	return top, h
}
