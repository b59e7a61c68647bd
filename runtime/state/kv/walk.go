package kv

import "sync"

// A conversation's next turn is looked up against the same blocks as its last one, plus
// a few: the walk over a 128k-token prompt's 8.3k blocks, a map probe each, was an eighth
// of a cache_aware router's CPU per request. A lookup therefore remembers how far each
// rank's prefix reached (walks), and the next lookup of a prompt that starts with the
// same blocks starts each rank's walk there, less what the rank lost since: blocks are
// added to a rank by stores and leave it only through unlink, which counts them and
// notes each one's place in its chain (rankState.lose). Engines evict blocks all the
// time, mostly far from a live conversation's start, so a loss only moves a rank's start
// back to the lost block's place, not to block 0. The answer is the walk's from block 0,
// exactly: a rank that held the first b blocks and lost none before place p still holds
// the first min(b, p). Block i of a prompt is the block whose hash chains over i blocks
// before it, so its place is i as long as hashes do not collide, which the index already
// takes as given (a block's owners are found by its hash alone).

// minWalkMemo is the shortest prompt, in blocks, whose walk is remembered: a shorter
// one walks in a few microseconds.
const minWalkMemo = 64

// maxWalks bounds the remembered walks; the memory is forgotten whole when full. A walk
// of more than maxWalkRanks ranks (a prefix the whole of a large fleet holds) is not
// remembered, so the memory stays within maxWalks × maxWalkRanks ranks' entries.
const (
	maxWalks     = 1024
	maxWalkRanks = 64
)

// walks remembers recent lookups' walks, under the hash of their prompt's block 2^k - 1
// (2^k the largest power of two within the prompt, at least minWalkMemo): a conversation
// grown by a turn finds its previous walk under the same block, or under the next
// shorter span when it crossed a power of two.
type walks struct {
	mu sync.Mutex
	m  map[int64]*walk
}

// walk is one lookup's result: the prompt's length and last hash, and how many leading
// blocks each rank held, with its rank state and that state's count of lost blocks then.
type walk struct {
	blocks int
	last   int64
	held   []walkHeld
}

type walkHeld struct {
	o        owner
	rs       *rankState
	unlinked uint64
	blocks   int
}

// get returns the remembered walk of a prompt that hashes starts with, or nil.
func (w *walks) get(hashes []int64) *walk {
	if len(hashes) < minWalkMemo {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for span := spanOf(len(hashes)); span >= minWalkMemo; span /= 2 {
		if m := w.m[hashes[span-1]]; m != nil && m.blocks <= len(hashes) && hashes[m.blocks-1] == m.last {
			return m
		}
	}
	return nil
}

// put remembers m, the walk of hashes; nil is no walk to remember.
func (w *walks) put(hashes []int64, m *walk) {
	span := spanOf(len(hashes))
	if m == nil || len(m.held) > maxWalkRanks || span < minWalkMemo {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil || len(w.m) >= maxWalks {
		w.m = map[int64]*walk{}
	}
	w.m[hashes[span-1]] = m
}

// spanOf is the largest power of two not past n, 0 for n 0.
func spanOf(n int) int {
	span := 0
	for s := 1; s <= n; s *= 2 {
		span = s
	}
	return span
}

// from returns the block rank o's walk starts at: past the blocks the remembered walk
// found it holding that it has not lost since, at least 1 (block 0's owners are the
// walk's start).
func (m *walk) from(o owner, rs *rankState) int {
	if m != nil {
		for _, h := range m.held {
			if h.o == o && h.rs == rs {
				return max(rs.intact(h.blocks, h.unlinked), 1)
			}
		}
	}
	return 1
}
