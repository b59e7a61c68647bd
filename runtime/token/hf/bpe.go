package hf

import (
	"math"
	"slices"

	"github.com/routerkit/router/runtime/token"
)

// noMerge is the merge value of a pair that has no merge.
const noMerge = math.MaxUint64

// heapMin is the pre-token length from which merge uses mergeRanks or mergeHeap: below
// it, rescanning the pairs for the lowest rank is faster; above it, rescanning would be
// quadratic. Most pre-tokens that short are one token, which the table of whole tokens
// answers without merging; of the others, a run of Chinese or Japanese letters (one
// pre-token) gained a fifth from mergeHeap at 16 bytes rather than 64.
const heapMin = 16

// ranksMin is the pre-token length from which merge uses mergeRanks rather than
// mergeHeap: below it the heap stays in the processor's cache, and mergeRanks' table of
// ranks (4 bytes a merge rank, 600 KB for Qwen) would cost more to set up than it saves.
const ranksMin = 4096

// checkMerges is how many merges a long pre-token's merge loop does between two looks at
// the request's context: a pre-token can be megabytes of one repeated character.
const checkMerges = 1 << 16

// model is a byte-level BPE model over raw bytes: the vocabulary's byte-level strings are
// turned back into the bytes they stand for at load time.
type model struct {
	byteID [256]uint32 // id of each single byte
	// merges maps a pair of ids to rank<<32 | merged id, so that comparing values
	// compares ranks.
	merges *mergeTable
	ranks  int // merge ranks are below it
	// monotone says that every merge ranks after every merge that makes one of its
	// parts, as BPE training produces them: see mergeRanks.
	monotone bool
	whole    *wholeTable // the pre-tokens that are one token
	chars    *charTable  // the characters merging starts from whole; nil for none
}

func (m *model) pair(a, b uint32) uint64 { return m.merges.get(a, b) }

// bpeBuf is merge's scratch space.
type bpeBuf struct {
	syms []uint32
	vals []uint64
	next []int32
	prev []int32
	heap []heapItem
	// mergeRanks': each rank's first item or -1 (all -1 between calls), the items, the
	// ranks whose buckets hold items, and one bucket's positions.
	head  []int32
	items []rankItem
	rankQ []heapItem // by rank alone: pos is 0
	batch []int32
	// mergeRuns': the pre-token as runs of one symbol, before and after a sweep.
	runs, runs2 []symRun
}

// merge appends the ids of the pre-token p to dst: starting from its bytes, it merges the
// pair of lowest merge rank, the leftmost among equals, until no pair has a merge. This is
// the order of the tokenizers crate's heap (Word::merge_all). A long pre-token's merging
// looks at meter's context now and then, and returns its error once it has ended.
func (m *model) merge(dst []uint32, p string, b *bpeBuf, meter *token.Meter) ([]uint32, error) {
	if len(p) < heapMin {
		return m.mergeScan(dst, p, b), nil
	}
	if m.monotone {
		if out, ok := m.mergeRuns(dst, p, b); ok {
			return out, nil
		}
		if len(p) >= ranksMin {
			return m.mergeRanks(dst, p, b, meter)
		}
	}
	return m.mergeHeap(dst, p, b, meter)
}

// mergeScan is merge for short pre-tokens: it rescans the pairs for the lowest rank
// after each merge.
func (m *model) mergeScan(dst []uint32, p string, b *bpeBuf) []uint32 {
	syms := m.premerge(b.syms[:0], p)
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
	val         uint64 // rank<<32 | merged id
	pos         int32
	left, right uint32 // the pair's symbols
}

func (h heapItem) less(o heapItem) bool {
	return h.val>>32 < o.val>>32 || h.val>>32 == o.val>>32 && h.pos < o.pos
}

// symbols fills b's symbol list with the symbols of p (premerge), each linked to its
// neighbours.
func (m *model) symbols(p string, b *bpeBuf) (syms []uint32, next, prev []int32) {
	if cap(b.syms) < len(p) { // at its size: growing a long pre-token's lists copies megabytes
		b.syms, b.next, b.prev = make([]uint32, 0, len(p)), make([]int32, 0, len(p)), make([]int32, 0, len(p))
	}
	syms, next, prev = m.premerge(b.syms[:0], p), b.next[:0], b.prev[:0]
	for i := range syms {
		next = append(next, int32(i+1))
		prev = append(prev, int32(i-1))
	}
	next[len(syms)-1] = -1
	return syms, next, prev
}

// appendSymbols appends the symbols left in the list to dst and keeps the buffers.
func appendSymbols(dst []uint32, b *bpeBuf, syms []uint32, next, prev []int32) []uint32 {
	for i := int32(0); i >= 0; i = next[i] {
		dst = append(dst, syms[i])
	}
	b.syms, b.next, b.prev = syms, next, prev
	return dst
}

// mergeHeap is merge for long pre-tokens in O(n log n): symbols form a linked list over
// the byte positions, and candidate merges wait in a min-heap ordered by (rank, position).
// Entries made stale by an earlier merge are recognised and dropped when popped. It
// serves pre-tokens below ranksMin bytes and vocabularies that are not monotone; on a
// long pre-token the heap outgrows the cache, and one of a repeated character leaves it
// many stale entries (about 1 µs a byte on a whitespace run).
func (m *model) mergeHeap(dst []uint32, p string, b *bpeBuf, meter *token.Meter) ([]uint32, error) {
	syms, next, prev := m.symbols(p, b)
	n := len(syms)
	h := b.heap[:0]
	defer func() { b.heap = h }()
	for i := 0; i+1 < n; i++ {
		if v := m.pair(syms[i], syms[i+1]); v != noMerge {
			h = heapPush(h, heapItem{v, int32(i), syms[i], syms[i+1]})
		}
	}
	for merges := 1; len(h) > 0; {
		var top heapItem
		top, h = heapPop(h)
		i := top.pos
		j := next[i]
		// Stale when i was merged away or a symbol of the pair changed: comparing the
		// symbols spares a lookup in the table of merges, and says the same as comparing
		// their merge with top.val would, as each rank is the merge of one pair.
		if j < 0 || syms[i] != top.left || syms[j] != top.right {
			continue
		}
		if merges++; merges%checkMerges == 0 {
			if err := meter.Err(); err != nil {
				return dst, err
			}
		}
		syms[i] = uint32(top.val)
		syms[j] = math.MaxUint32
		next[i] = next[j]
		if k := next[j]; k >= 0 {
			prev[k] = i
			if v := m.pair(syms[i], syms[k]); v != noMerge {
				h = heapPush(h, heapItem{v, i, syms[i], syms[k]})
			}
		}
		if k := prev[i]; k >= 0 {
			if v := m.pair(syms[k], syms[i]); v != noMerge {
				h = heapPush(h, heapItem{v, k, syms[k], syms[i]})
			}
		}
	}
	return appendSymbols(dst, b, syms, next, prev), nil
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

// mergeRanks is merge for long pre-tokens of a monotone vocabulary, in time linear in
// the pre-token's length but for sorting each rank's positions, which come nearly sorted.
//
// In a monotone vocabulary a merge of rank r only makes pairs of rank above r: each new
// pair holds the merged symbol, which only merges of higher rank use. The (rank,
// position) order of mergeHeap therefore takes every candidate of one rank, left to
// right, before any of the next: candidates wait in buckets by rank, a small heap holds
// the ranks whose buckets are not empty, and each bucket is done in one sweep of its
// sorted positions. A candidate is checked as mergeHeap checks it, so stale and repeated
// ones are dropped alike, and the ids are mergeHeap's: the tests compare the two. The
// heap of mergeHeap holds every candidate and is walked from top to bottom for each one;
// here the symbols are visited in order, which is what makes megabytes of one repeated
// character (a whitespace run) cost tens of nanoseconds a byte instead of a microsecond.
func (m *model) mergeRanks(dst []uint32, p string, b *bpeBuf, meter *token.Meter) ([]uint32, error) {
	syms, next, prev := m.symbols(p, b)
	if len(b.head) < m.ranks {
		b.head = make([]int32, m.ranks)
		for i := range b.head {
			b.head[i] = -1
		}
	}
	if cap(b.items) < len(p) {
		// At most one candidate a byte to start with, and a swept bucket's items are
		// reused: growing megabytes of them would cost more than the merging.
		b.items, b.batch = make([]rankItem, 0, len(p)), make([]int32, 0, len(p))
	}
	head, items, rankQ, free := b.head, b.items[:0], b.rankQ[:0], int32(-1)
	push := func(v uint64, pos int32) {
		r := uint32(v >> 32)
		if head[r] < 0 {
			rankQ = heapPush(rankQ, heapItem{val: uint64(r) << 32})
		}
		it := rankItem{pos, head[r]}
		if free >= 0 {
			head[r], free = free, items[free].next
			items[head[r]] = it
		} else {
			head[r] = int32(len(items))
			items = append(items, it)
		}
	}
	// On return, whether finished or stopped, every bucket is empty again.
	defer func() {
		for _, it := range rankQ {
			head[it.val>>32] = -1
		}
		b.items, b.rankQ = items, rankQ[:0]
	}()
	for i := 0; i+1 < len(syms); i++ {
		if v := m.pair(syms[i], syms[i+1]); v != noMerge {
			push(v, int32(i))
		}
	}
	merges := 0
	for len(rankQ) > 0 {
		var top heapItem
		top, rankQ = heapPop(rankQ)
		r := uint32(top.val >> 32)
		// The bucket's positions, its items then free for reuse. They were pushed
		// last first, in runs that each ascend (one run from each earlier rank's
		// sweep). No merge of rank r adds to its own bucket.
		batch, last := b.batch[:0], head[r]
		for k := head[r]; k >= 0; k = items[k].next {
			batch, last = append(batch, items[k].pos), k
		}
		items[last].next, free, head[r] = free, head[r], -1
		slices.Reverse(batch)
		if !slices.IsSorted(batch) {
			slices.Sort(batch)
		}
		b.batch = batch
		for _, i := range batch {
			j := next[i]
			if syms[i] == math.MaxUint32 || j < 0 {
				continue
			}
			v := m.pair(syms[i], syms[j])
			if v>>32 != uint64(r) {
				continue // stale: a neighbour changed
			}
			if merges++; merges%checkMerges == 0 {
				if err := meter.Err(); err != nil {
					return dst, err
				}
			}
			syms[i] = uint32(v)
			syms[j] = math.MaxUint32
			next[i] = next[j]
			if k := next[j]; k >= 0 {
				prev[k] = i
				if v := m.pair(syms[i], syms[k]); v != noMerge {
					push(v, i)
				}
			}
			if k := prev[i]; k >= 0 {
				if v := m.pair(syms[k], syms[i]); v != noMerge {
					push(v, k)
				}
			}
		}
	}
	return appendSymbols(dst, b, syms, next, prev), nil
}

// rankItem is a candidate merge of the symbol at pos with its right neighbour, in the
// bucket of its rank; next is the bucket's next item or -1.
type rankItem struct{ pos, next int32 }

// A pre-token goes to mergeRuns when its runs of one repeated byte average at least
// minRunBytes bytes (or it has at most 16 runs), and mergeRuns gives up on it, for
// mergeRanks, once its sweeps have looked at runsWork runs a byte of it: their number
// depends on the vocabulary, so the work is bounded for any text.
const (
	minRunBytes = 32
	runsWork    = 4
)

// symRun is n symbols sym in a row.
type symRun struct {
	sym uint32
	n   int
}

// mergeRuns is merge for a long pre-token of a monotone vocabulary made of long runs of
// one repeated byte, such as whitespace: it does mergeRanks' sweeps on the runs instead
// of the symbols, each sweep in time linear in the number of runs. It reports false,
// having appended nothing, for a pre-token of shorter runs and when it gives up.
//
// In a sweep of the pair (a, b) with a != b, each a-run that a b-run follows gives its
// last symbol and the b-run its first to one ab, as the occurrences cannot overlap. With
// a == b, the sweep merges the symbols of each a-run two by two from the left, an odd one
// staying last. No other pair can come before the lowest-ranked pair present, since
// every pair a sweep makes ranks above it (see mergeRanks).
func (m *model) mergeRuns(dst []uint32, p string, b *bpeBuf) ([]uint32, bool) {
	maxRuns := max(16, len(p)/minRunBytes)
	runs, next := b.runs[:0], b.runs2[:0]
	defer func() { b.runs, b.runs2 = runs, next }()
	for i := 0; i < len(p); {
		j := i + 1
		for j < len(p) && p[j] == p[i] {
			j++
		}
		if len(runs) == maxRuns {
			return dst, false
		}
		runs = append(runs, symRun{m.byteID[p[i]], j - i})
		i = j
	}
	for work := 0; ; work += len(runs) {
		if work > runsWork*len(p) {
			return dst, false
		}
		best := uint64(noMerge)
		for i, r := range runs {
			if r.n > 1 {
				best = min(best, m.pair(r.sym, r.sym))
			}
			if i+1 < len(runs) {
				best = min(best, m.pair(r.sym, runs[i+1].sym))
			}
		}
		if best == noMerge {
			break
		}
		merged := uint32(best)
		next = next[:0]
		for i, r := range runs {
			switch {
			case r.n > 1 && m.pair(r.sym, r.sym) == best:
				next = appendRun(next, symRun{merged, r.n / 2})
				next = appendRun(next, symRun{r.sym, r.n % 2})
				continue
			case i > 0 && m.pair(runs[i-1].sym, r.sym) == best:
				r.n-- // its first went to the merge on its left
			}
			right := i+1 < len(runs) && m.pair(r.sym, runs[i+1].sym) == best
			if right {
				r.n--
			}
			next = appendRun(next, r)
			if right {
				next = appendRun(next, symRun{merged, 1})
			}
		}
		runs, next = next, runs
	}
	for _, r := range runs {
		for range r.n {
			dst = append(dst, r.sym)
		}
	}
	return dst, true
}

// appendRun appends r to runs, joining it to the last run when they have one symbol.
func appendRun(runs []symRun, r symRun) []symRun {
	switch {
	case r.n == 0:
		return runs
	case len(runs) > 0 && runs[len(runs)-1].sym == r.sym:
		runs[len(runs)-1].n += r.n
		return runs
	}
	return append(runs, r)
}

// isMonotone reports whether every merge ranks after every merge that makes one of its
// parts, the condition under which mergeRanks gives mergeHeap's ids. BPE training makes
// a token before it merges it, so trained vocabularies are monotone (Qwen's, Llama 3's
// and GPT-2's are); a hand-edited merge list may not be.
func (t *mergeTable) isMonotone() bool {
	top := uint32(0)
	t.each(func(key, val uint64) { top = max(top, uint32(key>>32), uint32(key), uint32(val)) })
	// Indexed by id, as ids are dense: maps of 151k ids were 6 MB of garbage per load.
	// made holds 1 + the highest rank of a merge that makes the id (0: none), used the
	// lowest rank of a merge that uses it (^0: none).
	made, used := make([]uint32, top+1), make([]uint32, top+1)
	for i := range used {
		used[i] = ^uint32(0)
	}
	t.each(func(key, val uint64) {
		rank, id := uint32(val>>32), uint32(val)
		made[id] = max(made[id], rank+1)
		for _, part := range [2]uint32{uint32(key >> 32), uint32(key)} {
			used[part] = min(used[part], rank)
		}
	})
	for id, r := range made {
		if r > 0 && used[id] <= r-1 {
			return false
		}
	}
	return true
}
