package sim

// block is one cached page: blockSize token ids whose KV the engine keeps for reuse.
type block struct {
	hash     int64
	parent   *block
	tokens   []uint32
	children int
	// refs counts the running requests whose prompt uses this block; a block with refs
	// is locked and cannot be evicted.
	refs int
	// prev and next link the block into the LRU list while refs == 0.
	prev, next *block
}

// prefixCache is the paged prefix cache of one rank, a radix tree of full blocks.
//
// Blocks are keyed by SGLang's chained block hash, which covers the whole prefix up to and
// including the block, so a map lookup per block walks the tree. Unlocked blocks sit in an
// LRU list. Locking or unlocking a path touches every block on it, leaf first, so a block
// is always nearer the front than its parent: the front is always a leaf, and evicting from
// the front never orphans a block.
//
// Every change is reported through emit as a KV event. prefixCache is not safe for
// concurrent use.
type prefixCache struct {
	blockSize int
	blocks    map[int64]*block
	lru       block // sentinel: lru.next is the least recently used unlocked block
	// size is the number of tokens cached; evictable the number in unlocked blocks.
	size, evictable int
	emit            func(kvEvent)
}

func newPrefixCache(blockSize int, emit func(kvEvent)) *prefixCache {
	c := &prefixCache{blockSize: blockSize, blocks: make(map[int64]*block), emit: emit}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	return c
}

// matchLen returns how many leading blocks of a prompt with these block hashes are cached.
func (c *prefixCache) matchLen(hashes []int64) int {
	for i, h := range hashes {
		if _, ok := c.blocks[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// match returns the cached leading blocks of a prompt with these block hashes.
func (c *prefixCache) match(hashes []int64) []*block {
	path := make([]*block, 0, len(hashes))
	for _, h := range hashes {
		b, ok := c.blocks[h]
		if !ok {
			break
		}
		path = append(path, b)
	}
	return path
}

// lock pins a path of blocks for a running request.
func (c *prefixCache) lock(path []*block) {
	for _, b := range path {
		if b.refs == 0 {
			c.unlink(b)
			c.evictable -= c.blockSize
		}
		b.refs++
	}
}

// unlock releases a path locked by lock or insert, making blocks no request uses the most
// recently used ones, leaf first.
func (c *prefixCache) unlock(path []*block) {
	for i := len(path) - 1; i >= 0; i-- {
		b := path[i]
		if b.refs--; b.refs == 0 {
			c.pushBack(b)
			c.evictable += c.blockSize
		}
	}
}

// insert returns the block with this hash under parent (nil for the first block), creating
// and announcing it if it is new. The block comes back locked.
func (c *prefixCache) insert(parent *block, hash int64, tokens []uint32) *block {
	if b, ok := c.blocks[hash]; ok {
		c.lock([]*block{b})
		return b
	}
	b := &block{hash: hash, parent: parent, tokens: tokens, refs: 1}
	c.blocks[hash] = b
	c.size += c.blockSize
	ev := kvEvent{kind: blockStored, hash: hash, tokens: tokens}
	if parent != nil {
		parent.children++
		ev.parent, ev.hasParent = parent.hash, true
	}
	c.emit(ev)
	return b
}

// evict removes least recently used unlocked blocks until at least n tokens are freed or
// nothing is evictable, and returns the number of tokens freed.
func (c *prefixCache) evict(n int) int {
	freed := 0
	for freed < n && c.lru.next != &c.lru {
		b := c.lru.next
		c.unlink(b)
		delete(c.blocks, b.hash)
		if b.parent != nil {
			b.parent.children--
		}
		c.size -= c.blockSize
		c.evictable -= c.blockSize
		freed += c.blockSize
		c.emit(kvEvent{kind: blockRemoved, hash: b.hash})
	}
	return freed
}

// clear drops every block. The caller guarantees that no block is locked.
func (c *prefixCache) clear() {
	clear(c.blocks)
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	c.size, c.evictable = 0, 0
	c.emit(kvEvent{kind: allBlocksCleared})
}

func (c *prefixCache) unlink(b *block) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
}

func (c *prefixCache) pushBack(b *block) {
	b.prev, b.next = c.lru.prev, &c.lru
	c.lru.prev.next = b
	c.lru.prev = b
}
