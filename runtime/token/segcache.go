package token

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// SegmentCache remembers the ids of long texts that a tokenizer encodes independently of
// what surrounds them, so that a conversation resending its history tokenizes only its
// new turn.
//
// A segment must be a text whose ids do not depend on its neighbours: for the stand-in
// vocabulary a message's content (the template's markers are tokens of their own), for a
// HuggingFace tokenizer the text between two added tokens (which are cut out of the raw
// text before normalization and pre-tokenization, so each stretch between them is
// encoded on its own). The cache is then exact by construction: a hit returns the ids
// the encoder computed for the very same text, which it compares in full, not only by
// hash.
//
// Clients choose the texts, so the cache is bounded by the bytes it holds (each entry's
// text and ids) and evicts with the clock algorithm, an approximation of LRU that costs a
// hit only a flag. It is sharded to spread lock contention and safe for concurrent use.
type SegmentCache struct {
	seed   maphash.Seed
	shards [segShards]segShard
	// shardBytes is each shard's budget; an entry larger than half of it is not kept, so
	// one huge text cannot flush a shard.
	shardBytes int
	hits       atomic.Int64
	misses     atomic.Int64
}

// segShards is the number of independently locked parts of a SegmentCache.
const segShards = 8

// MinSegment is the shortest text worth caching: shorter ones are encoded faster than
// they are hashed, compared and copied, and would crowd the cache.
const MinSegment = 256

// DefaultSegmentBytes is the budget of the caches the tokenizers keep: about 80
// conversations of 128k tokens of English text (text and ids take about 8 bytes a token).
const DefaultSegmentBytes = 128 << 20

type segShard struct {
	mu    sync.Mutex
	index map[uint64]int32 // hash of the text -> slot
	slots []segSlot
	free  []int32 // empty slots
	held  int     // bytes held by live slots
	hand  int     // next eviction candidate
}

// segSlot is one entry. text and ids are never modified once stored, so a reader may use
// them after releasing the lock.
type segSlot struct {
	hash uint64
	text string
	ids  []uint32
	live bool
	used bool // hit since the hand last passed
}

func (e *segSlot) size() int { return len(e.text) + 4*len(e.ids) }

// NewSegmentCache returns a cache that holds at most about maxBytes of texts and ids.
func NewSegmentCache(maxBytes int) *SegmentCache {
	c := &SegmentCache{seed: maphash.MakeSeed(), shardBytes: max(maxBytes/segShards, 1)}
	for i := range c.shards {
		c.shards[i].index = map[uint64]int32{}
	}
	return c
}

// Append appends the ids of text to dst: the cached ones when text was seen before,
// otherwise encode's, which must append the ids of text alone to its argument and
// return the extended slice. Texts shorter than MinSegment bypass the cache.
func (c *SegmentCache) Append(dst []uint32, text string, encode func(dst []uint32, text string) []uint32) []uint32 {
	if ids, ok := c.Get(text); ok {
		return append(dst, ids...)
	}
	n := len(dst)
	dst = encode(dst, text)
	c.Put(text, dst[n:])
	return dst
}

// Get returns the cached ids of text, which the caller must not modify. Texts shorter
// than MinSegment are never cached.
func (c *SegmentCache) Get(text string) ([]uint32, bool) {
	if c == nil || len(text) < MinSegment {
		return nil, false
	}
	h := maphash.String(c.seed, text)
	sh := &c.shards[h%segShards]
	sh.mu.Lock()
	var ids []uint32
	found := false
	if i, ok := sh.index[h]; ok {
		e := &sh.slots[i]
		if e.text == text {
			e.used = true
			ids, found = e.ids, true
		}
	}
	sh.mu.Unlock()
	if found {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return ids, found
}

// Put caches copies of text and of its ids, as the tokenizer computed them alone.
func (c *SegmentCache) Put(text string, ids []uint32) {
	if c == nil || len(text) < MinSegment {
		return
	}
	h := maphash.String(c.seed, text)
	c.put(&c.shards[h%segShards], h, text, ids)
}

// put stores copies of text and ids under h, replacing a different text of the same hash.
func (c *SegmentCache) put(sh *segShard, h uint64, text string, ids []uint32) {
	e := segSlot{hash: h, live: true}
	if len(text)+4*len(ids) > c.shardBytes/2 {
		return
	}
	e.text, e.ids = strings.Clone(text), slices.Clone(ids)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, ok := sh.index[h]; ok {
		if sh.slots[i].text == text {
			return // stored by a concurrent miss
		}
		sh.evict(int(i))
	}
	for sh.held+e.size() > c.shardBytes {
		sh.evictOne()
	}
	var i int
	if n := len(sh.free); n > 0 {
		i = int(sh.free[n-1])
		sh.free = sh.free[:n-1]
		sh.slots[i] = e
	} else {
		i = len(sh.slots)
		sh.slots = append(sh.slots, e)
	}
	sh.index[h] = int32(i)
	sh.held += e.size()
}

// evictOne advances the clock hand to the first live slot not used since the hand last
// passed it, and evicts it. The shard must hold something.
func (sh *segShard) evictOne() {
	for {
		sh.hand = (sh.hand + 1) % len(sh.slots)
		e := &sh.slots[sh.hand]
		switch {
		case !e.live:
		case e.used:
			e.used = false
		default:
			sh.evict(sh.hand)
			return
		}
	}
}

func (sh *segShard) evict(i int) {
	e := &sh.slots[i]
	sh.held -= e.size()
	delete(sh.index, e.hash)
	*e = segSlot{}
	sh.free = append(sh.free, int32(i))
}

// SegmentStats are a SegmentCache's counters since it was made.
type SegmentStats struct {
	// Hits and Misses count lookups of texts of at least MinSegment bytes.
	Hits, Misses int64
	// Entries and Bytes are what the cache holds now.
	Entries, Bytes int64
}

// Stats returns the cache's counters.
func (c *SegmentCache) Stats() SegmentStats {
	s := SegmentStats{Hits: c.hits.Load(), Misses: c.misses.Load()}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		s.Entries += int64(len(sh.index))
		s.Bytes += int64(sh.held)
		sh.mu.Unlock()
	}
	return s
}
