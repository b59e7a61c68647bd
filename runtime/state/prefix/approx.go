// Package prefix holds the approximate prefix index: which engines probably hold which
// prompt prefixes in their KV cache, learned from the router's own dispatches rather than
// from the engines' KV events.
//
// Most SGLang router deployments run cache-aware routing without KV-event wiring: the
// router remembers where it sent each prompt and sends later prompts sharing a prefix to
// the same engine (sgl-router's approximate radix tree, llm-d's approximate prefix
// producer, Dynamo's approximate mode). This index does the same over SGLang's chained
// block hashes (token.BlockHashes), so a lookup is the same walk as in the event-fed
// index: an engine holds n leading blocks of a prompt when it holds each of the first n
// hashes.
//
// Each engine's entries form an LRU list bounded by a capacity in blocks, which mirrors
// the engine's KV cache size: an engine evicts its least recently used pages when full,
// and so does the index. The capacity is the configured one or, without one, what the
// engine reports (SetCapacityTokens), re-read as it changes. Entries also expire a fixed time after their last use, because
// an engine under other traffic evicts pages the router cannot see. Both evictions are
// O(1) per entry, paid by inserts; lookups never write.
package prefix

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of an approximate source whose plan leaves them unset.
const (
	// DefaultCapacityTokens is llm-d's sizing of its approximate index (31,250 blocks of
	// 16 tokens): the KV cache left on an 80 GB H100 serving Llama 3 8B, about 500,000
	// tokens.
	DefaultCapacityTokens = 500_000
	// DefaultTTL is Dynamo's --router-ttl-secs for its approximate mode, and sgl-router's
	// default eviction interval.
	DefaultTTL = 120 * time.Second
	// DefaultBlockSize is the page size of SGLang's and vLLM's prefix caching that
	// engines use unless configured otherwise.
	DefaultBlockSize = 16
)

// Match is an engine's probable cached prefix of a request, in leading blocks.
type Match struct {
	Engine string
	Blocks int
}

// Config sizes an approximate index.
type Config struct {
	// CapacityTokens bounds each engine's entries; it is rounded down to whole blocks,
	// at least one. 0 sizes each engine by the capacity it reports (Reported) and
	// DefaultCapacityTokens until it has reported.
	CapacityTokens int64
	// Reported returns the KV capacity in tokens an engine last reported, 0 for none; it
	// is read at each insert and size query, so a changed report resizes the engine's
	// entry. nil: every engine has the default.
	Reported func(engineID string) int64
	// TTL is how long an entry lives after its last insert; 0 keeps entries until the
	// capacity evicts them, as sgl-router's tree does.
	TTL time.Duration
	// BlockSize is the page size in tokens the hashes are computed with.
	BlockSize int
}

// Approx is the approximate prefix index of a set of engines. It is safe for concurrent
// use: dispatches insert, picks look up, and each engine has its own lock so that
// inserts for one engine never wait on another's.
type Approx struct {
	cfg    Config
	blocks int // capacity per engine in blocks until the engine reports its own
	now    func() time.Time
	// members is the engines the index tracks, replaced whole (copy on write) when one is
	// added or dropped, so inserts and lookups take no index-wide lock.
	members atomic.Pointer[approxMembers]
	mu      sync.Mutex // serialises membership changes
}

type approxMembers struct {
	engines map[string]*lru
	byModel map[string][]*lru // in the order engines were added
}

// Engine names an engine the index tracks and the model it serves.
type Engine struct {
	ID    string
	Model string
}

// New returns an empty index of engines. now is the clock, nil for time.Now; tests inject
// one to expire entries deterministically.
func New(cfg Config, engines []Engine, now func() time.Time) *Approx {
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	if now == nil {
		now = time.Now
	}
	a := &Approx{cfg: cfg, now: now}
	a.members.Store(&approxMembers{engines: map[string]*lru{}, byModel: map[string][]*lru{}})
	a.blocks = a.toBlocks(cmp.Or(cfg.CapacityTokens, DefaultCapacityTokens))
	for _, e := range engines {
		a.AddEngine(e)
	}
	return a
}

// AddEngine starts tracking an engine with nothing held; one already tracked keeps what
// it holds.
func (a *Approx) AddEngine(e Engine) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.members.Load()
	if old.engines[e.ID] != nil {
		return
	}
	l := newLRU(e.ID, a.blocks)
	next := &approxMembers{engines: maps.Clone(old.engines), byModel: maps.Clone(old.byModel)}
	next.engines[e.ID] = l
	next.byModel[e.Model] = append(slices.Clip(next.byModel[e.Model]), l)
	a.members.Store(next)
}

// DropEngine stops tracking an engine and frees what it held.
func (a *Approx) DropEngine(engineID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.members.Load()
	l := old.engines[engineID]
	if l == nil {
		return
	}
	next := &approxMembers{engines: maps.Clone(old.engines), byModel: map[string][]*lru{}}
	delete(next.engines, engineID)
	for model, ls := range old.byModel {
		if kept := slices.DeleteFunc(slices.Clone(ls), func(x *lru) bool { return x == l }); len(kept) > 0 {
			next.byModel[model] = kept
		}
	}
	a.members.Store(next)
	// Frees the entries; an insert that loaded l before the swap is lost with it.
	l.mu.Lock()
	l.reset()
	l.mu.Unlock()
}

// BlockSize is the page size the index's hashes must be computed with.
func (a *Approx) BlockSize() int { return a.cfg.BlockSize }

// CapacityBlocks is the engine's capacity in blocks, 0 for an engine not tracked.
func (a *Approx) CapacityBlocks(engineID string) int {
	if l := a.members.Load().engines[engineID]; l != nil {
		a.refreshCapacity(l)
		return int(l.capacity.Load())
	}
	return 0
}

// refreshCapacity sizes the engine's entries by the KV capacity it reports, evicting its
// least recently used entries if they no longer fit. A configured capacity
// (Config.CapacityTokens) wins, and a report of 0, which says nothing, changes nothing.
func (a *Approx) refreshCapacity(l *lru) {
	if a.cfg.CapacityTokens > 0 || a.cfg.Reported == nil {
		return
	}
	tokens := a.cfg.Reported(l.id)
	if tokens <= 0 {
		return
	}
	blocks := a.toBlocks(tokens)
	if int(l.capacity.Load()) == blocks {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.capacity.Store(int32(blocks))
	for len(l.slots) > blocks {
		l.drop(l.tail)
	}
}

// toBlocks converts a capacity in tokens to whole blocks, at least one and at most what
// a slab index addresses.
func (a *Approx) toBlocks(tokens int64) int {
	return int(min(max(tokens/int64(a.cfg.BlockSize), 1), math.MaxInt32))
}

// Insert records that the engine now holds the prompt whose block hashes are hashes, in
// order. The first block becomes the engine's most recently used entry and the last the
// least recent of the prompt, so capacity eviction trims prompts from their tails, as an
// engine's radix cache evicts leaves first; a prefix shared by many prompts stays longest.
// An unknown engine is ignored.
func (a *Approx) Insert(engineID string, hashes []int64) {
	l := a.members.Load().engines[engineID]
	if l == nil || len(hashes) == 0 {
		return
	}
	a.refreshCapacity(l)
	now := a.now().UnixNano()
	expires := int64(0)
	if a.cfg.TTL > 0 {
		expires = now + int64(a.cfg.TTL)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	// A prompt longer than the capacity keeps its leading blocks.
	capacity := int(l.capacity.Load())
	for i := min(len(hashes), capacity) - 1; i >= 0; i-- {
		l.touch(hashes[i], expires, capacity)
	}
}

// Lookup returns, for each engine of the model holding at least the first block, how many
// leading blocks of hashes it holds. A nil index matches nothing.
func (a *Approx) Lookup(model string, hashes []int64) []Match {
	if a == nil || len(hashes) == 0 {
		return nil
	}
	now := a.now().UnixNano()
	var out []Match
	for _, l := range a.members.Load().byModel[model] {
		if n := l.prefix(hashes, now); n > 0 {
			out = append(out, Match{Engine: l.id, Blocks: n})
		}
	}
	return out
}

// Blocks returns how many live entries the engine has, expiring old ones first.
func (a *Approx) Blocks(engineID string) int {
	l := a.members.Load().engines[engineID]
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(a.now().UnixNano())
	return len(l.slots)
}

// serves reports whether the index tracks the engine as one of the model's.
func (a *Approx) serves(model, engineID string) bool {
	return slices.ContainsFunc(a.members.Load().byModel[model], func(l *lru) bool { return l.id == engineID })
}

// Has reports whether the index tracks the engine.
func (a *Approx) Has(engineID string) bool { return a.members.Load().engines[engineID] != nil }

// RemoveEngine forgets everything the engine holds, for a worker that left the registry.
func (a *Approx) RemoveEngine(engineID string) {
	if l := a.members.Load().engines[engineID]; l != nil {
		l.mu.Lock()
		l.reset()
		l.mu.Unlock()
	}
}

// lru is one engine's entries: a hash map into a slab of nodes linked from most to least
// recently used. Slab indices instead of pointers keep a node at 24 bytes and out of the
// garbage collector's pointer scan.
type lru struct {
	id string
	// capacity is the entry bound in blocks; written under mu, read without it by
	// CapacityBlocks.
	capacity atomic.Int32
	mu       sync.RWMutex
	slots    map[int64]int32
	nodes    []node
	head     int32 // most recently used, nilNode when empty
	tail     int32 // least recently used
	free     int32 // a freed node, chained through next
}

type node struct {
	hash       int64
	prev, next int32
	// expires is the node's expiry in Unix nanoseconds; 0 never expires.
	expires int64
}

const nilNode = -1

func newLRU(id string, capacity int) *lru {
	l := &lru{id: id}
	l.capacity.Store(int32(capacity))
	l.reset()
	return l
}

func (l *lru) reset() {
	l.slots = map[int64]int32{}
	l.nodes = nil
	l.head, l.tail, l.free = nilNode, nilNode, nilNode
}

// prefix counts the leading hashes the engine holds unexpired.
func (l *lru) prefix(hashes []int64, now int64) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for _, h := range hashes {
		i, ok := l.slots[h]
		if !ok || l.nodes[i].expired(now) {
			break
		}
		n++
	}
	return n
}

func (n *node) expired(now int64) bool { return n.expires != 0 && n.expires <= now }

// touch makes h the most recently used entry with a new expiry, evicting the least
// recently used entry when a new one would exceed capacity.
func (l *lru) touch(h int64, expires int64, capacity int) {
	if i, ok := l.slots[h]; ok {
		l.nodes[i].expires = expires
		l.unlink(i)
		l.pushFront(i)
		return
	}
	if len(l.slots) >= capacity {
		l.drop(l.tail)
	}
	i := l.free
	if i != nilNode {
		l.free = l.nodes[i].next
		l.nodes[i] = node{hash: h, expires: expires}
	} else {
		i = int32(len(l.nodes))
		l.nodes = append(l.nodes, node{hash: h, expires: expires})
	}
	l.slots[h] = i
	l.pushFront(i)
}

// expire drops expired entries from the tail. Every entry has the same lifetime from its
// last touch, so the least recently used entry expires first and the walk stops at the
// first live one: each entry is dropped once, which makes expiry O(1) amortised.
func (l *lru) expire(now int64) {
	for l.tail != nilNode && l.nodes[l.tail].expired(now) {
		l.drop(l.tail)
	}
}

func (l *lru) drop(i int32) {
	l.unlink(i)
	delete(l.slots, l.nodes[i].hash)
	l.nodes[i] = node{next: l.free}
	l.free = i
}

func (l *lru) unlink(i int32) {
	n := &l.nodes[i]
	if n.prev != nilNode {
		l.nodes[n.prev].next = n.next
	} else {
		l.head = n.next
	}
	if n.next != nilNode {
		l.nodes[n.next].prev = n.prev
	} else {
		l.tail = n.prev
	}
}

func (l *lru) pushFront(i int32) {
	n := &l.nodes[i]
	n.prev, n.next = nilNode, l.head
	if l.head != nilNode {
		l.nodes[l.head].prev = i
	}
	l.head = i
	if l.tail == nilNode {
		l.tail = i
	}
}
