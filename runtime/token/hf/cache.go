package hf

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
)

// Cache bounds. Clients choose the text, so the cache is bounded in entries and in key
// bytes: keys longer than maxCachedKey are never cached (such pre-tokens are rare, and a
// pre-token has at most one id per byte), which caps the memory at about
// cacheShards*shardEntries*(maxCachedKey+4*maxCachedKey) bytes, 20 MB, and is typically
// a tenth of that. Keys shorter than minCachedKey are not cached either: merging them
// costs about what a miss does (a lookup, a copy of the key, an eviction), most
// pre-tokens that short are in the table of whole tokens anyway, and keeping them would
// halve the speed on text never seen before (BenchmarkEncode's "new").
const (
	cacheShards  = 32
	shardEntries = 1024
	minCachedKey = 12
	maxCachedKey = 128
)

// cache maps pre-tokens to their ids. It is sharded to spread lock contention, and each
// shard evicts with the clock algorithm: an approximation of LRU that needs no list
// updates on a hit, only a flag.
type cache struct {
	seed   maphash.Seed
	shards [cacheShards]shard
}

type shard struct {
	mu    sync.Mutex
	index map[string]int32 // key -> slot
	slots []slot
	hand  int // next eviction candidate
}

// slot is one cache entry. Most pre-tokens are one to three tokens, whose ids are kept in
// the slot itself to save an allocation per entry.
type slot struct {
	key   string
	short [3]uint32
	long  []uint32 // the ids when there are more than len(short)
	n     int32    // number of ids
	used  bool     // hit since the hand last passed
}

func (e *slot) ids() []uint32 {
	if int(e.n) <= len(e.short) {
		return e.short[:e.n]
	}
	return e.long
}

func newCache() *cache {
	c := &cache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].index = map[string]int32{} // grown as used: a full cache is 1.6 MB of index, an idle one none
	}
	return c
}

func (c *cache) shard(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)%cacheShards]
}

// get appends the cached ids of key to dst and reports whether there were any.
func (c *cache) get(dst []uint32, key string) ([]uint32, bool) {
	if len(key) < minCachedKey || len(key) > maxCachedKey {
		return dst, false
	}
	s := c.shard(key)
	s.mu.Lock()
	i, ok := s.index[key]
	if ok {
		s.slots[i].used = true
		dst = append(dst, s.slots[i].ids()...)
	}
	s.mu.Unlock()
	return dst, ok
}

// put caches copies of key and ids.
func (c *cache) put(key string, ids []uint32) {
	if len(key) < minCachedKey || len(key) > maxCachedKey {
		return
	}
	e := slot{key: strings.Clone(key), n: int32(len(ids))}
	if len(ids) <= len(e.short) {
		copy(e.short[:], ids)
	} else {
		e.long = slices.Clone(ids)
	}
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.index[key]; ok {
		return
	}
	if len(s.slots) < shardEntries {
		s.index[e.key] = int32(len(s.slots))
		s.slots = append(s.slots, e)
		return
	}
	for s.slots[s.hand].used {
		s.slots[s.hand].used = false
		s.hand = (s.hand + 1) % len(s.slots)
	}
	delete(s.index, s.slots[s.hand].key)
	s.slots[s.hand] = e
	s.index[e.key] = int32(s.hand)
	s.hand = (s.hand + 1) % len(s.slots)
}
