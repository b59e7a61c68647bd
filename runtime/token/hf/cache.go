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
//
// A pre-token is cached on its second miss, not its first (see shard.door): most of the
// long pre-tokens of text never seen, such as runs of CJK letters, never come back, and
// storing each would cost a copy of its key and ids, an eviction and two map updates.
// The doors add cacheShards*doorSlots*4 bytes, 128 KB.
const (
	cacheShards  = 32
	shardEntries = 1024
	doorSlots    = 1024
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
	// door remembers the pre-tokens that missed once, a 32-bit fingerprint of each in
	// a slot chosen by its hash (a later miss overwrites it): a pre-token is cached
	// when it misses while its fingerprint is there. Fixed in size, it bounds nothing
	// but itself; a fingerprint shared by chance only lets a pre-token in early.
	door [doorSlots]uint32
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

// cacheable reports whether the cache may hold key.
func cacheable(key string) bool {
	return len(key) >= minCachedKey && len(key) <= maxCachedKey && !cjkRun(key)
}

// cjkRunChars is the number of CJK characters that cjkRun looks for.
const cjkRunChars = 6

// cjkRun reports whether key ends in cjkRunChars characters between U+3000 and U+9FFF
// (CJK punctuation, kana, ideographs), whose UTF-8 lead bytes are 0xE3 to 0xE9. Such a
// pre-token is a run of CJK letters from one punctuation mark to the next, a phrase
// that text never seen almost never repeats whole: looking it up, and remembering its
// miss at the door, costs more than it saves (BenchmarkEncode's cjk/stream). Texts
// seen whole are served by the segment cache instead. Whatever it answers, the ids are
// the same: it only decides what the cache holds.
func cjkRun(key string) bool {
	if len(key) < 3*cjkRunChars {
		return false
	}
	for i := len(key) - 3; i >= len(key)-3*cjkRunChars; i -= 3 {
		if key[i] < 0xE3 || key[i] > 0xE9 {
			return false
		}
	}
	return true
}

// hash is the hash of key that get and put take.
func (c *cache) hash(key string) uint64 { return maphash.String(c.seed, key) }

// get appends the cached ids of key, whose hash is h, to dst and reports whether there
// were any.
func (c *cache) get(dst []uint32, key string, h uint64) ([]uint32, bool) {
	if !cacheable(key) {
		return dst, false
	}
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	i, ok := s.index[key]
	if ok {
		s.slots[i].used = true
		dst = append(dst, s.slots[i].ids()...)
	}
	s.mu.Unlock()
	return dst, ok
}

// put caches copies of key, whose hash is h, and ids, which get missed: on the second
// such miss of key while the shard's door remembers the first.
func (c *cache) put(key string, h uint64, ids []uint32) {
	if !cacheable(key) {
		return
	}
	s := &c.shards[h%cacheShards]
	door, fp := &s.door[h/cacheShards%doorSlots], uint32(h>>32)
	s.mu.Lock()
	defer s.mu.Unlock()
	if *door != fp {
		*door = fp
		return
	}
	if _, ok := s.index[key]; ok {
		return
	}
	e := slot{key: strings.Clone(key), n: int32(len(ids))}
	if len(ids) <= len(e.short) {
		copy(e.short[:], ids)
	} else {
		e.long = slices.Clone(ids)
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
