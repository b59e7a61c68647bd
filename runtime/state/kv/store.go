package kv

import (
	"cmp"
	"crypto/sha256"
	"math"
)

// held is one block a rank holds, under the engine's name for it.
type held struct {
	router int64     // the router's hash of the block
	where  placement // the groups and tiers holding it
	gen    uint32    // matches the block's entry in rankState.order while it is current
}

// orderEntry records when a rank took a block, for evicting the oldest at the cap.
type orderEntry struct {
	engine int64
	gen    uint32
}

// rankState is what one engine rank holds: the engine's hash of each block, mapped to the
// router's. order lists the blocks oldest first, with entries made stale by removals
// skipped and compacted away, so that at most max blocks are tracked.
type rankState struct {
	held  table[held] // by the engine's hash
	order []orderEntry
	head  int
	gen   uint32
	max   int // 0: unbounded
	// unlinked counts the blocks the rank lost, for the walks remembered (walk.go), and
	// lost keeps the places (as block.pos) of the latest lossLog of them, the i-th
	// lost at lost[i%lossLog]; nil until the rank loses a block.
	unlinked uint64
	lost     []uint16
}

// lossLog bounds the places of lost blocks a rank keeps: a remembered walk past more
// losses than that starts again from block 0.
const lossLog = 512

// maxPos is the largest block.pos: the place of a block that far down a chain is kept as
// a lower bound, which is all a remembered walk needs.
const maxPos = math.MaxUint16

// lose records the loss of a block at place pos (as block.pos).
func (rs *rankState) lose(pos uint16) {
	if rs.lost == nil {
		rs.lost = make([]uint16, lossLog)
	}
	rs.lost[rs.unlinked%lossLog] = pos
	rs.unlinked++
}

// intact returns how many of the first blocks of a chain the rank still holds, given
// that it held the first n when it had lost since blocks: n, less what it lost since
// at an earlier place (a block at place maxPos-1 or later leaves the first maxPos-1), 0
// when it lost a block of unknown place or too many to tell.
func (rs *rankState) intact(n int, since uint64) int {
	if rs.unlinked-since > lossLog {
		return 0
	}
	for i := since; i < rs.unlinked; i++ {
		pos := rs.lost[i%lossLog]
		if pos == 0 {
			return 0
		}
		n = min(n, int(pos-1))
	}
	return n
}

func newRankState(maxBlocks int) *rankState {
	return &rankState{max: maxBlocks}
}

// Apply applies one rank's events in order and reports whether the index knows the rank.
func (ix *Index) Apply(engineID string, rank int, events ...Event) bool {
	o, ok := ix.rank(engineID, rank)
	if !ok {
		return false
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if !ix.owns(o, engineID) { // dropped meanwhile
		return false
	}
	st := &ix.ownerOf[o].stats
	ix.warm(o, events)
	var buf []byte
	for _, e := range events {
		switch e.Kind {
		case BlockStored:
			buf = ix.store(o, e, st, buf)
		case BlockRemoved:
			for _, h := range e.Hashes {
				ix.remove(o, h, placeOf(e.Medium, cmp.Or(e.Groups, allGroups)))
			}
		case AllBlocksCleared:
			ix.clear(o)
		}
	}
	return true
}

// maxWarm bounds the blocks of a batch warm reads ahead: more would push the first ones
// out of the cache before they are applied.
const maxWarm = 256

// warm reads, before a batch is applied, the table slots its probes will read: the
// rank's entry of each block the batch names, then the router's entry of each block it
// removes. Each probe of a large table is a cache miss; loads that do not wait for one
// another are in flight together, so the batch's misses overlap rather than follow one
// another as the probes, each waiting for the last, would have them.
func (ix *Index) warm(o owner, events []Event) {
	rs := ix.ranks[o]
	var sum int64
	n := 0
	for _, e := range events {
		for _, h := range e.Hashes[:min(len(e.Hashes), maxWarm-n)] {
			sum += rs.held.touch(h)
		}
		if n += len(e.Hashes); n >= maxWarm {
			break
		}
	}
	n = 0
	for _, e := range events {
		if e.Kind != BlockRemoved {
			continue
		}
		for _, h := range e.Hashes[:min(len(e.Hashes), maxWarm-n)] {
			if cur, ok := rs.held.get(h); ok {
				sum += ix.blocks.touch(cur.router)
			}
		}
		if n += len(e.Hashes); n >= maxWarm {
			break
		}
	}
	ix.warmed = sum
}

// store records a BlockStored event. With token ids, the router hashes each block,
// chaining from the parent the engine names; a parent the rank does not hold (it was
// evicted here, or stored before the subscription joined) leaves the event's blocks
// unplaceable, and they are counted, not guessed. Without token ids the engine's hashes
// are taken as the router's.
func (ix *Index) store(o owner, e Event, st *engineStats, buf []byte) []byte {
	if e.Foreign {
		st.foreign.add(len(e.Hashes))
		return buf
	}
	where := placeOf(e.Medium, cmp.Or(e.Groups, 1))
	if len(e.Tokens) == 0 {
		for _, h := range e.Hashes {
			ix.hold(o, h, h, nil, 0, where, st)
		}
		return buf
	}
	n := len(e.Hashes)
	if n == 0 || len(e.Tokens)%n != 0 || (e.BlockSize > 0 && len(e.Tokens) != n*e.BlockSize) {
		st.malformed.add(1)
		return buf
	}
	size := len(e.Tokens) / n
	var parent *[sha256.Size]byte // nil, or &digest: the previous block's
	var digest [sha256.Size]byte
	var pos uint16 // the previous block's place plus one, with parent
	if e.HasParent {
		h, ok := ix.ranks[o].held.get(e.Parent)
		if ok {
			if b := ix.blocks.ref(h.router); b != nil && b.digested {
				digest, parent, pos = b.digest, &digest, b.pos
			}
		}
		if parent == nil && !(e.ParentMayBeRoot && !ok) {
			st.orphans.add(n)
			return buf
		}
	}
	for i, h := range e.Hashes {
		var router int64
		var kept bool
		// A block hashed without a parent is a chain's first; one after a block of
		// unknown place has none either, and one after maxPos is at maxPos or later.
		if parent == nil {
			pos = 1
		} else if pos != 0 && pos < maxPos {
			pos++
		}
		digest, router, buf = chainHash(parent, e.Tokens[i*size:(i+1)*size], buf)
		if digest, kept, pos = ix.hold(o, h, router, &digest, pos, where, st); kept {
			parent = &digest
		} else {
			parent = nil
		}
	}
	return buf
}

// hold makes rank o hold the block the engine calls engine and the router calls router,
// in placements w, evicting the rank's oldest block when that passes its cap. digest is
// the block's SHA-256, nil when unknown, and pos its place in its chain plus one, 0 when
// unknown. It returns the digest the index keeps for the block, whether it keeps one,
// and the place it keeps.
func (ix *Index) hold(o owner, engine, router int64, digest *[sha256.Size]byte, pos uint16, w placement, st *engineStats) ([sha256.Size]byte, bool, uint16) {
	rs := ix.ranks[o]
	cur, had := rs.held.upsert(engine)
	if had && cur.router == router {
		cur.where |= w
		if b := ix.blocks.ref(router); b != nil {
			return b.learn(digest, pos)
		}
		return [sha256.Size]byte{}, false, 0
	}
	if had { // the engine reused its name for other tokens
		ix.unlink(o, cur.router)
	}
	rs.gen++
	*cur = held{router: router, where: w, gen: rs.gen}
	b, _ := ix.blocks.upsert(router)
	b.add(o)
	kept, ok, at := b.learn(digest, pos)
	rs.order = append(rs.order, orderEntry{engine: engine, gen: rs.gen})
	if rs.max > 0 && rs.held.len() > rs.max {
		ix.evictOldest(o, st)
	}
	rs.compact()
	return kept, ok, at
}

// evictOldest drops the rank's oldest current block.
func (ix *Index) evictOldest(o owner, st *engineStats) {
	rs := ix.ranks[o]
	for rs.head < len(rs.order) {
		e := rs.order[rs.head]
		rs.head++
		if cur, ok := rs.held.get(e.engine); ok && cur.gen == e.gen {
			ix.drop(o, e.engine)
			st.evicted.add(1)
			return
		}
	}
}

// compact bounds order: once stale entries outnumber current ones it keeps only the
// current entries, oldest first.
func (rs *rankState) compact() {
	if live := len(rs.order) - rs.head; live <= 2*rs.held.len()+64 {
		if rs.head > len(rs.order)/2 {
			rs.order = append(rs.order[:0], rs.order[rs.head:]...)
			rs.head = 0
		}
		return
	}
	kept := rs.order[:0]
	for _, e := range rs.order[rs.head:] {
		if cur, ok := rs.held.get(e.engine); ok && cur.gen == e.gen {
			kept = append(kept, e)
		}
	}
	rs.order, rs.head = kept, 0
}

// remove takes placements w away from the rank's block; the rank holds it until no group
// holds it on any tier.
func (ix *Index) remove(o owner, engine int64, w placement) {
	cur := ix.ranks[o].held.ref(engine)
	if cur == nil {
		return
	}
	if left := cur.where &^ w; left != 0 {
		cur.where = left
		return
	}
	ix.drop(o, engine)
}

// drop forgets the rank's block entirely.
func (ix *Index) drop(o owner, engine int64) {
	rs := ix.ranks[o]
	cur, ok := rs.held.get(engine)
	if !ok {
		return
	}
	rs.held.remove(engine)
	ix.unlink(o, cur.router)
}

// unlink removes o from the router block's owners, and the block once nobody holds it.
func (ix *Index) unlink(o owner, router int64) {
	b := ix.blocks.ref(router)
	if b == nil || !b.remove(o) {
		return
	}
	ix.ranks[o].lose(b.pos)
	if len(b.owners()) == 0 {
		ix.blocks.remove(router)
	}
}

func (ix *Index) clear(o owner) {
	rs := ix.ranks[o]
	rs.held.each(func(_ int64, cur held) { ix.unlink(o, cur.router) })
	rs.held.reset()
	rs.order, rs.head = nil, 0
}
