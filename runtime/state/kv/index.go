// Package kv tracks which engines hold which prefixes of their KV cache, for cache-aware
// selection (docs/design.md, Prefix state): the local prefix index, the ZMQ subscriptions that
// feed it from the engines' KV events, and a client for a remote prefix indexer.
//
// The index stores prefix ownership and storage tiers, never KV tensors. It names blocks
// by the router's own chained block hash (SGLang's SHA-256 chain, token.BlockHashes),
// recomputed from the token ids each BlockStored event carries, whatever hash the engine
// itself uses: vLLM's hashes are seeded per process and cannot be reproduced, SGLang's
// happen to equal the router's. Per engine rank it keeps the engine's hash of each block
// it holds and the router's hash it stands for, so a stored block's parent is found
// through the engine's parent hash and BlockRemoved works for any hash scheme. One index
// thus serves a fleet that mixes SGLang and vLLM engines.
//
// A lookup hashes the prompt and walks the chain: an engine holds a prefix of n blocks
// when it holds each of the first n hashes.
package kv

import (
	"crypto/sha256"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv/zmtp"
	"github.com/routerkit/router/runtime/token"
)

// DefaultBlockSize is the page size assumed for an engine whose plan sets no
// kv_events.block_size. It is the simulator's default page size (sim.DefaultConfig), a
// common SGLang --page-size for prefix caching and vLLM's default block size on CUDA.
// The router does not read the page size from the engine: configure block_size for
// engines that use another one, since hashes of differently sized pages never match.
const DefaultBlockSize = 16

// BlockSize returns the page size of an engine's KV events in tokens.
func BlockSize(e plan.Engine) int {
	if e.KVEvents != nil && e.KVEvents.BlockSize > 0 {
		return e.KVEvents.BlockSize
	}
	return DefaultBlockSize
}

// Medium is a set of storage tiers holding a block. An engine that moves a page from GPU
// to host memory publishes a removal for one tier and a store for the other; it still
// holds the prefix, so ownership lasts while any tier holds the block.
type Medium uint8

// Storage tiers, as SGLang and vLLM name them in KV events.
const (
	MediumGPU Medium = 1 << iota
	MediumCPU
	MediumDisk
	MediumExternal

	allMedia = MediumGPU | MediumCPU | MediumDisk | MediumExternal
)

// parseMedium maps an event's medium name to its tier. An absent medium on a store means
// GPU, the engines' default; on a removal it means every tier.
func parseMedium(name string, absent Medium) Medium {
	switch name {
	case "":
		return absent
	case "GPU":
		return MediumGPU
	case "CPU", "CPU_PINNED":
		return MediumCPU
	case "DISK":
		return MediumDisk
	default:
		return MediumExternal
	}
}

// groupSet is a set of KV-cache groups of vLLM's hybrid-attention models (group_idx):
// a model with full-attention and sliding-window layers keeps one cache group per kind
// and publishes each group's stores and removals separately, under the same block
// hashes. The index tells groupSlots groups apart; indices beyond share the last slot,
// where a removal from one drops the others' claim, never keeps a stale one.
type groupSet uint16

const (
	groupSlots = 16
	allGroups  = groupSet(1<<groupSlots - 1)
)

// placement is where a rank holds a block: a bit per (group, tier), 4 tiers per group.
type placement uint64

// placeOf returns the placements of tiers m in groups g.
func placeOf(m Medium, g groupSet) placement {
	var p placement
	for slot := range groupSlots {
		if g&(1<<slot) != 0 {
			p |= placement(m&allMedia) << (4 * slot)
		}
	}
	return p
}

// EventKind is the type of a KV event.
type EventKind uint8

// KV event kinds.
const (
	BlockStored EventKind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

// Event is one decoded KV event of an engine rank. Hashes are the engine's block hashes;
// Medium is the tier stored to or removed from.
type Event struct {
	Kind   EventKind
	Hashes []int64
	Medium Medium
	// BlockSize is the page size the engine reported with a store, 0 when absent.
	BlockSize int
	// Groups is the KV-cache group stored to or removed from; empty when the engine
	// names none, which means group 0 for a store and every group for a removal. A rank holds a block while any
	// group holds it on any tier: a sliding-window group dropping a block the
	// full-attention group still holds does not end the claim.
	Groups groupSet

	// A store's token ids, len(Hashes) blocks of them, and the engine's hash of the block
	// before the first (HasParent false: the first block of a sequence). A store without
	// token ids names its blocks by the router's hash directly, which only an engine that
	// hashes as SGLang does can do.
	Tokens    []uint32
	Parent    int64
	HasParent bool
	// ParentMayBeRoot marks parent hash 0 in the array encoding, which llm-d's
	// simulator writes for "no parent": the blocks start a sequence unless the rank
	// holds a block the engine calls 0.
	ParentMayBeRoot bool
	// Foreign marks blocks whose engine hash covers more than their tokens (a LoRA
	// adapter, multimodal inputs, a cache salt). The router's hash of the tokens alone
	// would claim them for plain prompts, so they are not indexed.
	Foreign bool
}

// Match is an engine's cached prefix of a request: the number of leading blocks it holds.
type Match struct {
	Engine string
	Blocks int
}

// owner is an (engine, DP rank) pair, numbered at construction. Ranks own blocks
// separately because each rank has its own cache and publisher.
type owner uint32

type engineInfo struct {
	id        string
	model     string
	blockSize int
	maxBlocks int
	ranks     []owner
	stats     engineStats
}

// block is one router-hashed block held by at least one rank: a table value of 56
// bytes, so that with its key a slot is one cache line, a probe reads it whole, and
// storing a block allocates nothing while at most len(first) ranks hold it.
type block struct {
	// digest is the block's full SHA-256, which its children's hashes chain over; unknown
	// (digested false) for a block stored by hash alone, which then has no children.
	digest   [sha256.Size]byte
	digested bool
	n        uint8 // owners in first, while more is nil
	// pos is the block's place in its chain plus one (1: a first block), 0 when unknown
	// (a block stored by hash alone, or chained from one), maxPos for any place from
	// maxPos-1 on; remembered walks read it. It fits the padding before first.
	pos   uint16
	first [3]owner
	// more holds every owner once more than len(first) ranks hold the block.
	more *[]owner
}

// owners returns the ranks holding the block. The slice aliases the block: it is valid
// while the block stays where it is.
func (b *block) owners() []owner {
	if b.more != nil {
		return *b.more
	}
	return b.first[:b.n]
}

// add makes o an owner of the block.
func (b *block) add(o owner) {
	switch {
	case slices.Contains(b.owners(), o):
	case b.more != nil:
		*b.more = append(*b.more, o)
	case int(b.n) < len(b.first):
		b.first[b.n] = o
		b.n++
	default:
		more := append(slices.Clone(b.first[:]), o)
		b.more = &more
	}
}

// remove takes o out of the block's owners and reports whether it was one.
func (b *block) remove(o owner) bool {
	owners := b.owners()
	i := slices.Index(owners, o)
	if i < 0 {
		return false
	}
	last := len(owners) - 1
	owners[i] = owners[last]
	if b.more != nil {
		*b.more = owners[:last]
	} else {
		b.n--
	}
	return true
}

// learn records the block's digest and place if it had none; nil and 0 are none. It
// returns the digest the block keeps, whether it has one, and its place.
func (b *block) learn(digest *[sha256.Size]byte, pos uint16) ([sha256.Size]byte, bool, uint16) {
	if !b.digested && digest != nil {
		b.digest, b.digested = *digest, true
	}
	if b.pos == 0 {
		b.pos = pos
	}
	return b.digest, b.digested, b.pos
}

// Index is the local prefix index: for each router block hash, the engine ranks holding
// it. It is safe for concurrent use: subscriptions write, picks read.
type Index struct {
	// members is the engines the index tracks, replaced whole (copy on write) when an
	// engine is added or dropped, so the lookups that name an engine take no lock.
	members atomic.Pointer[members]

	mu      sync.RWMutex
	blocks  table[block]  // by the router's hash
	ownerOf []*engineInfo // by owner; nil for a freed owner
	ranks   []*rankState  // by owner
	// free lists the owners of dropped engines, reused by the next engine added, so an
	// index whose engines come and go stays as large as its largest membership.
	free []owner
	// walks are recent lookups' results, where the next turn's walk starts.
	walks walks
	// warmed keeps what warm reads, so that the compiler keeps the reads.
	warmed int64

	unknownTopics counter // bind-mode messages whose topic names no engine
	// rejected counts the ZMQ connections closed by the zmtp bounds, by reason.
	rejected map[zmtp.Reason]*counter
}

// NewIndex returns an empty index for the plan's engines that publish KV events (an
// engine without kv_events never owns a block). A nil plan gives an index of no engines,
// on which every lookup misses.
func NewIndex(p *plan.Plan) *Index {
	ix := &Index{rejected: map[zmtp.Reason]*counter{}}
	for _, r := range zmtp.Reasons {
		ix.rejected[r] = &counter{}
	}
	ix.members.Store(&members{engines: map[string]*engineInfo{}, sizes: map[string][]int{}})
	if p == nil {
		return ix
	}
	for _, e := range p.Engines {
		ix.AddEngine(e)
	}
	return ix
}

// members is one immutable view of the index's engines.
type members struct {
	engines map[string]*engineInfo
	sizes   map[string][]int // model -> distinct block sizes
}

func (ix *Index) m() *members { return ix.members.Load() }

// AddEngine starts tracking an engine that publishes KV events, with nothing held; an
// engine without kv_events, or one already tracked, is left as it is. Its subscription is
// started separately (Subscribe), after it is added.
func (ix *Index) AddEngine(e plan.Engine) {
	if e.KVEvents == nil || ix.m().engines[e.ID] != nil {
		return
	}
	info := &engineInfo{id: e.ID, model: e.Model, blockSize: BlockSize(e), maxBlocks: e.KVEvents.MaxBlocks}
	ix.mu.Lock()
	for range max(e.DPSize, 1) {
		var o owner
		if n := len(ix.free); n > 0 {
			o, ix.free = ix.free[n-1], ix.free[:n-1]
			ix.ownerOf[o], ix.ranks[o] = info, newRankState(info.maxBlocks)
		} else {
			o = owner(len(ix.ownerOf))
			ix.ownerOf = append(ix.ownerOf, info)
			ix.ranks = append(ix.ranks, newRankState(info.maxBlocks))
		}
		info.ranks = append(info.ranks, o)
	}
	old := ix.m()
	next := &members{engines: maps.Clone(old.engines), sizes: map[string][]int{}}
	next.engines[e.ID] = info
	next.sizes = sizesOf(next.engines)
	ix.members.Store(next)
	ix.mu.Unlock()
}

// DropEngine forgets an engine entirely: the blocks it holds and its place in the index,
// which a later engine reuses. Stop the engine's subscription first: a feed still running
// would write to the reused place.
func (ix *Index) DropEngine(engineID string) { ix.forget(engineID, true) }

// sizesOf lists each model's distinct block sizes, in engine id order so that a lookup's
// order does not depend on map iteration.
func sizesOf(engines map[string]*engineInfo) map[string][]int {
	out := map[string][]int{}
	for _, id := range slices.Sorted(maps.Keys(engines)) {
		info := engines[id]
		if !slices.Contains(out[info.model], info.blockSize) {
			out[info.model] = append(out[info.model], info.blockSize)
		}
	}
	return out
}

// BlockSizes returns the distinct page sizes of the model's indexed engines, so a lookup
// hashes a prompt once per size. The slice must not be modified.
func (ix *Index) BlockSizes(model string) []int {
	if ix == nil {
		return nil
	}
	return ix.m().sizes[model]
}

// rank returns the owner of an engine's rank, or false if the index does not know it.
func (ix *Index) rank(engineID string, rank int) (owner, bool) {
	info := ix.m().engines[engineID]
	if info == nil || rank < 0 || rank >= len(info.ranks) {
		return 0, false
	}
	return info.ranks[rank], true
}

// ClearRank forgets everything an engine rank holds. A subscription calls it when it can
// no longer vouch for the rank's state: on a sequence gap it cannot refill, a publisher
// restart or a reconnect, events may have been lost, and ownership is unknown until the
// engine stores blocks again.
func (ix *Index) ClearRank(engineID string, rank int) {
	if o, ok := ix.rank(engineID, rank); ok {
		ix.mu.Lock()
		if ix.owns(o, engineID) {
			ix.clear(o)
		}
		ix.mu.Unlock()
	}
}

// RemoveEngine forgets everything the engine holds, for a worker that left the registry.
func (ix *Index) RemoveEngine(engineID string) { ix.forget(engineID, false) }

// forget clears the engine's blocks and, with drop, frees its owners and takes it out of
// the index's members.
func (ix *Index) forget(engineID string, drop bool) {
	info := ix.m().engines[engineID]
	if info == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, o := range info.ranks {
		if !ix.owns(o, engineID) {
			continue
		}
		ix.clear(o)
		if drop {
			ix.ownerOf[o], ix.ranks[o] = nil, nil
			ix.free = append(ix.free, o)
		}
	}
	if drop {
		next := &members{engines: maps.Clone(ix.m().engines)}
		delete(next.engines, engineID)
		next.sizes = sizesOf(next.engines)
		ix.members.Store(next)
	}
}

// owns reports whether owner o is still one of the engine's ranks: an engine dropped
// after its owners were looked up has given them away. Call with ix.mu held.
func (ix *Index) owns(o owner, engineID string) bool {
	return ix.ownerOf[o] != nil && ix.ownerOf[o].id == engineID
}

// owners returns the ranks holding the router's block hash, valid until the index
// changes. Call with ix.mu held.
func (ix *Index) owners(hash int64) []owner {
	if b := ix.blocks.ref(hash); b != nil {
		return b.owners()
	}
	return nil
}

// Blocks returns how many blocks the engine's ranks hold in total.
func (ix *Index) Blocks(engineID string) int {
	info := ix.m().engines[engineID]
	if info == nil {
		return 0
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := 0
	for _, o := range info.ranks {
		if ix.owns(o, engineID) {
			n += ix.ranks[o].held.len()
		}
	}
	return n
}

// Lookup returns, for each engine of the given page size holding at least the first
// block of ids, how many leading blocks it holds. An engine's prefix is its best rank's,
// since the engine places the request on a rank itself. A nil index matches nothing.
func (ix *Index) Lookup(ids []uint32, blockSize int) []Match {
	if ix == nil || blockSize <= 0 || len(ids) < blockSize {
		return nil
	}
	return ix.LookupHashes(token.ReadBlockHashes(ids, blockSize), blockSize)
}

// LookupHashes is Lookup for a request already hashed with the page size.
func (ix *Index) LookupHashes(hashes []int64, blockSize int) []Match {
	if ix == nil || len(hashes) == 0 {
		return nil
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	memo := ix.walks.get(hashes)
	type walker struct {
		o    owner
		from int // the blocks before from are known held
	}
	var buf [16]walker
	alive := buf[:0]
	start := len(hashes)
	for _, o := range ix.owners(hashes[0]) {
		if ix.ownerOf[o].blockSize == blockSize {
			w := walker{o, memo.from(o, ix.ranks[o])}
			alive, start = append(alive, w), min(start, w.from)
		}
	}
	var out []Match
	var done *walk // what this walk leaves for the next, for prompts long enough to keep it
	if len(hashes) >= minWalkMemo {
		done = &walk{blocks: len(hashes), last: hashes[len(hashes)-1]}
	}
	record := func(o owner, blocks int) {
		if rs := ix.ranks[o]; done != nil {
			done.held = append(done.held, walkHeld{o: o, rs: rs, unlinked: rs.unlinked, blocks: blocks})
		}
		id := ix.ownerOf[o].id
		for i := range out {
			if out[i].Engine == id {
				out[i].Blocks = max(out[i].Blocks, blocks)
				return
			}
		}
		out = append(out, Match{Engine: id, Blocks: blocks})
	}
	// Block i's hash chains over every earlier block, so a rank holding it holds the whole
	// prefix up to it; walk while some rank holds every block so far. A rank whose
	// remembered walk vouches for block i needs no probe of it.
	for i := start; i < len(hashes) && len(alive) > 0; i++ {
		var next []owner
		probed := false
		kept := alive[:0]
		for _, w := range alive {
			if w.from > i {
				kept = append(kept, w)
				continue
			}
			if !probed {
				next, probed = ix.owners(hashes[i]), true
			}
			if slices.Contains(next, w.o) {
				kept = append(kept, w)
			} else {
				record(w.o, i)
			}
		}
		alive = kept
	}
	for _, w := range alive {
		record(w.o, len(hashes))
	}
	ix.walks.put(hashes, done)
	return out
}
