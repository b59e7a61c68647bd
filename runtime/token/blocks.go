package token

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"unsafe"
)

// BlockHashes returns SGLang's page hash of every full block of blockSize ids. A trailing
// partial block has no hash, because engines cache only whole pages.
//
// The hash is the engine's, not the router's choice: SGLang publishes it in its KV events
// (python/sglang/srt/mem_cache/utils.py). Block i's digest is SHA-256 over block i-1's
// 32-byte digest (absent for block 0) followed by each id as a 4-byte little-endian
// unsigned integer; the published hash is the digest's first 8 bytes read as a big-endian
// signed integer. Reproducing it lets the router match a request's blocks against the
// hashes in BlockStored events directly. blockSize must be positive.
//
// A long prompt's leading blocks are usually those of an earlier prompt, the same
// conversation one turn shorter, and SHA-256 over a 128k-token prompt costs about a
// millisecond: prompts of at least MinChainTokens ids take the hashes of the blocks they
// share with a remembered prompt from the chain cache and hash only the rest.
func BlockHashes(ids []uint32, blockSize int) []int64 {
	hs := ReadBlockHashes(ids, blockSize)
	if len(ids) >= MinChainTokens {
		return slices.Clone(hs) // the chain cache's
	}
	return hs
}

// ReadBlockHashes is BlockHashes for a caller that only reads the hashes, a prefix
// lookup: a long prompt's are the chain cache's own, not copied.
func ReadBlockHashes(ids []uint32, blockSize int) []int64 {
	if len(ids) < MinChainTokens {
		hs, _ := hashBlocks(ids, blockSize, nil, nil)
		return hs
	}
	return chains.hashes(ids, blockSize)
}

// hashBlocks appends to hashes the hash of every full block of ids, chaining from parent
// (nil: ids start the prompt). When digests is not nil it also returns every block's
// digest appended to it, for the chain cache to continue from.
func hashBlocks(ids []uint32, blockSize int, parent *[sha256.Size]byte, digests [][sha256.Size]byte) ([]int64, [][sha256.Size]byte) {
	n := len(ids) / blockSize
	hashes := make([]int64, 0, n)
	return appendBlockHashes(hashes, ids, blockSize, parent, digests)
}

// appendBlockHashes is hashBlocks appending to hashes.
func appendBlockHashes(hashes []int64, ids []uint32, blockSize int, parent *[sha256.Size]byte, digests [][sha256.Size]byte) ([]int64, [][sha256.Size]byte) {
	buf := make([]byte, 0, sha256.Size+4*blockSize)
	var digest [sha256.Size]byte
	if parent != nil {
		digest = *parent
	}
	for b := range len(ids) / blockSize {
		buf = buf[:0]
		if b > 0 || parent != nil {
			buf = append(buf, digest[:]...)
		}
		for _, id := range ids[b*blockSize : (b+1)*blockSize] {
			buf = binary.LittleEndian.AppendUint32(buf, id)
		}
		digest = sha256.Sum256(buf)
		hashes = append(hashes, int64(binary.BigEndian.Uint64(digest[:8])))
		if digests != nil {
			digests = append(digests, digest)
		}
	}
	return hashes, digests
}

// MinChainTokens is the shortest prompt the chain cache remembers: a shorter one hashes
// in well under 100 µs.
const MinChainTokens = 8 << 10

// DefaultChainBytes is the chain cache's budget: about 40 conversations of 128k tokens
// (each remembered prompt holds its ids and every block's digest and hash, about 6.5
// bytes a token with pages of 16).
const DefaultChainBytes = 32 << 20

// chains is the process's chain cache: block hashes depend on nothing but the ids and
// the page size, so every model and index shares it.
var chains = newChainCache(DefaultChainBytes)

// chainCache remembers the block hashes of recent long prompts, so that a prompt that
// extends one of them hashes only its new blocks. It is exact by construction: a prompt
// takes a remembered hash only for blocks whose ids it compares equal, in full, to the
// remembered prompt's, and the chain continues from the remembered digest of the last
// of them.
//
// A prompt is remembered under its page size and the hash of its first 2^k blocks, 2^k
// the largest power of two not past its length, and looked up under every such span of
// its own from the longest down: a conversation grown by a turn finds its previous
// prompt under the same span, or the next shorter one when it crossed a power of two,
// while conversations that share only a system prompt do not replace each other. Before
// hashing its ids for those keys, a prompt checks whether it extends one of the last few
// prompts remembered under its longest span (recentPrefix): a conversation's next turn
// then takes its previous prompt's key, and costs one comparison of its ids instead of a
// comparison and a hash.
//
// Clients choose the prompts, so the cache is bounded by the bytes it holds and forgets
// the oldest remembered prompt first: a conversation in use is remembered anew at every
// turn. The room chains keep to grow into (chainRoom) is not counted: it adds at most an
// eighth and 64 blocks a remembered prompt. It is safe for concurrent use.
type chainCache struct {
	seed maphash.Seed
	max  int // bytes

	mu      sync.Mutex
	entries map[chainKey]*chain
	order   []chainKey // the entries' keys, oldest first
	held    int
	// recent holds the keys of the last recentChains prompts remembered, written
	// round-robin (written counts them), for recentPrefix.
	recent  [recentChains]chainKey
	written uint
}

// chainKey names a remembered prompt: its page size, the blocks its key spans and their
// ids' hash.
type chainKey struct {
	blockSize, span int
	sum             uint64
}

// chain is one remembered prompt. Its blocks are never modified once stored, so a reader
// may use them after releasing the lock.
//
// A conversation's prompts grow by a turn at a time, and copying the whole prompt into
// each new chain cost more than hashing its new blocks: a chain's arrays have room to
// grow, and the prompt that extends the last chain written into them (their tip) appends
// its new blocks in place, past every block an earlier chain sees. Another prompt
// extending the same chain copies.
type chain struct {
	key     chainKey
	ids     []uint32 // whole blocks only
	hashes  []int64
	digests [][sha256.Size]byte
	tip     *chainTip // shared by the chains whose blocks are in the same arrays
}

// chainTip is how many blocks of a chain's arrays hold a chain's blocks; the blocks past
// it are free for the chain of that length to grow into. Guarded by chainCache.mu.
type chainTip struct{ blocks int }

// chainRoom is the room a chain's new arrays leave to grow, in blocks: an eighth of the
// prompt, a few dozen turns of a 128k-token conversation.
func chainRoom(blocks int) int { return blocks/8 + minChainSpan }

func (c *chain) size() int { return 4*len(c.ids) + 8*len(c.hashes) + sha256.Size*len(c.digests) }

// minChainSpan is the shortest span, in blocks, a prompt is looked up under.
const minChainSpan = 64

func newChainCache(maxBytes int) *chainCache {
	return &chainCache{seed: maphash.MakeSeed(), max: maxBytes, entries: map[chainKey]*chain{}}
}

// hashes returns BlockHashes(ids, blockSize), reusing a remembered prompt's leading
// hashes, and remembers ids. The hashes are the cache's, not to be modified.
func (c *chainCache) hashes(ids []uint32, blockSize int) []int64 {
	n := len(ids) / blockSize
	ids = ids[:n*blockSize]
	span := longestSpan(n)
	if span == 0 {
		hs, _ := hashBlocks(ids, blockSize, nil, nil)
		return hs
	}
	prev, key := c.recentPrefix(ids, blockSize, span)
	shared := 0
	if prev != nil {
		shared = len(prev.ids) / blockSize
	} else {
		keys := c.keys(ids, blockSize)
		key = keys[len(keys)-1]
		c.mu.Lock()
		for i := len(keys) - 1; i >= 0 && prev == nil; i-- {
			prev = c.entries[keys[i]]
		}
		c.mu.Unlock()
		if prev != nil {
			shared = sharedBlocks(ids, prev.ids, blockSize)
		}
	}
	if shared == n && len(prev.ids) == len(ids) && prev.key == key {
		return prev.hashes[:n:n] // the same prompt again: nothing to remember
	}
	next := c.grow(prev, shared, n, blockSize)
	next.key = key
	next.ids = append(next.ids, ids[shared*blockSize:]...)
	var parent *[sha256.Size]byte
	if shared > 0 {
		parent = &prev.digests[shared-1]
	}
	next.hashes, next.digests = appendBlockHashes(next.hashes, ids[shared*blockSize:], blockSize, parent, next.digests)
	c.remember(next)
	return next.hashes[:n:n]
}

// recentChains is how many of the last remembered prompts a prompt checks for being
// their extension before it hashes its ids for keys: one per conversation that a few
// clients grow at once.
const recentChains = 8

// recentPrefix returns one of the last remembered prompts that is a prefix of ids (all of
// its ids equal, compared in full) under the same longest span, and the key of ids, which
// is then that prompt's: a conversation grown by a turn finds its previous prompt without
// hashing its ids (a tenth of a millisecond at 128k tokens); it hashes them when it
// crossed a power of two or another prompt came between. nil when there is none.
func (c *chainCache) recentPrefix(ids []uint32, blockSize, span int) (*chain, chainKey) {
	var cand *chain
	c.mu.Lock()
	for i := range recentChains {
		k := c.recent[(c.written-1-uint(i))%recentChains]
		e := c.entries[k]
		if e == nil || k.blockSize != blockSize || k.span != span || len(e.ids) > len(ids) {
			continue
		}
		// The last block first: a prompt of another conversation differs there.
		last := len(e.ids) - blockSize
		if slices.Equal(e.ids[last:], ids[last:len(e.ids)]) {
			cand = e
			break
		}
	}
	c.mu.Unlock()
	if cand == nil || !slices.Equal(cand.ids, ids[:len(cand.ids)]) {
		return nil, chainKey{}
	}
	return cand, cand.key
}

// longestSpan is the longest span, in blocks, a prompt of n blocks is remembered under:
// the largest minChainSpan·2^k not past n, or 0 when n is shorter than minChainSpan.
func longestSpan(n int) int {
	span := 0
	for s := minChainSpan; s <= n; s *= 2 {
		span = s
	}
	return span
}

// grow returns the chain of a prompt of n blocks whose first shared are prev's, holding
// those shared blocks: in prev's arrays when prev is their tip and they have room for n
// blocks (the tip then moves to n), or else in new arrays.
func (c *chainCache) grow(prev *chain, shared, n, blockSize int) *chain {
	if shared > 0 && shared == len(prev.hashes) && cap(prev.hashes) >= n {
		c.mu.Lock()
		inPlace := prev.tip.blocks == shared
		if inPlace {
			prev.tip.blocks = n
		}
		c.mu.Unlock()
		if inPlace {
			return &chain{ids: prev.ids, hashes: prev.hashes, digests: prev.digests, tip: prev.tip}
		}
	}
	room := n + chainRoom(n)
	next := &chain{ids: make([]uint32, 0, room*blockSize), hashes: make([]int64, 0, room), digests: make([][sha256.Size]byte, 0, room), tip: &chainTip{blocks: n}}
	if shared > 0 {
		next.ids = append(next.ids, prev.ids[:shared*blockSize]...)
		next.hashes = append(next.hashes, prev.hashes[:shared]...)
		next.digests = append(next.digests, prev.digests[:shared]...)
	}
	return next
}

// keys returns the keys of ids' spans of 2^k blocks, shortest first, from minChainSpan to
// the longest within ids, hashing ids once.
func (c *chainCache) keys(ids []uint32, blockSize int) []chainKey {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var keys []chainKey
	done := 0
	for span := minChainSpan; span*blockSize <= len(ids); span *= 2 {
		h.Write(idBytes(ids[done : span*blockSize]))
		done = span * blockSize
		keys = append(keys, chainKey{blockSize: blockSize, span: span, sum: h.Sum64()})
	}
	return keys
}

// idBytes is the memory of ids, for hashing and comparing.
func idBytes(ids []uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), 4*len(ids))
}

// sharedBlocks returns the number of leading blocks of blockSize ids that a and b hold
// alike.
func sharedBlocks(a, b []uint32, blockSize int) int {
	n := min(len(a), len(b)) / blockSize
	lo, hi := 0, n // blocks [0, lo) are equal; the first difference is before block hi
	if slices.Equal(a[:n*blockSize], b[:n*blockSize]) {
		return n
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if slices.Equal(a[lo*blockSize:mid*blockSize], b[lo*blockSize:mid*blockSize]) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// remember stores e, replacing the prompt of the same key, and forgets the oldest
// prompts until the cache is within its budget. A prompt larger than half the budget is
// not kept, so one huge prompt cannot flush the cache.
func (c *chainCache) remember(e *chain) {
	if e.size() > c.max/2 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[e.key]; ok {
		c.held -= old.size()
		i := slices.Index(c.order, e.key)
		c.order = slices.Delete(c.order, i, i+1)
	}
	c.entries[e.key] = e
	c.order = append(c.order, e.key)
	c.recent[c.written%recentChains] = e.key
	c.written++
	c.held += e.size()
	for c.held > c.max {
		c.held -= c.entries[c.order[0]].size()
		delete(c.entries, c.order[0])
		c.order = slices.Delete(c.order, 0, 1)
	}
}
