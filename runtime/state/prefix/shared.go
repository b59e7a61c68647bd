package prefix

// Replicas share an approximate index through a Store (docs/serve.md, "Running several
// routers"): each replica keeps its own Approx, learned from its own dispatches, and also
// claims in the store the prompts it dispatches, so that the next turn of a conversation
// finds its engine whichever replica it reaches. The store holds checkpoints rather than
// every block: the hash of every CheckpointStride-th block of a prompt, which names the
// whole prefix up to it because block hashes are chained. A lookup then costs one round
// trip for at most MaxCheckpoints keys, and a claim one write per checkpoint, while the
// match it finds is short of the true one by less than CheckpointStride blocks.

// Checkpoint sampling of the shared entries.
const (
	// CheckpointStride is how many blocks apart a prompt's shared checkpoints are: 128
	// tokens with the default page size of 16, well under the cache-aware policy's
	// default min_matched_tokens (1024), so the shortfall rarely changes a pick.
	CheckpointStride = 8
	// MaxCheckpoints bounds the keys one lookup or claim touches: the first 65,536
	// tokens of a prompt with 16-token pages. Longer prompts match on that prefix.
	MaxCheckpoints = 512
)

// Store is where replicas share which engines hold which prompt prefixes. A store that
// cannot answer (it is down, or slow) says so, and the replica routes with its own index.
type Store interface {
	// Claim records that the engine holds the prefixes ending at the checkpoints.
	Claim(engineID string, checkpoints []int64)
	// Unclaim withdraws the engine's claims of the checkpoints, for a dispatch that failed.
	Unclaim(engineID string, checkpoints []int64)
	// Holders returns, for each checkpoint in order, the engines holding it; ok is false
	// when the store did not answer. Checkpoints are chained hashes of token ids, so the
	// engines of every model that was sent the same prompt hold it.
	Holders(checkpoints []int64) (holders [][]string, ok bool)
}

// Checkpoints returns the checkpoints of a prompt's block hashes: every
// CheckpointStride-th hash, at most MaxCheckpoints of them. A prompt shorter than the
// stride has none, and shares nothing.
func Checkpoints(hashes []int64) []int64 {
	n := min(len(hashes)/CheckpointStride, MaxCheckpoints)
	if n == 0 {
		return nil
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = hashes[(i+1)*CheckpointStride-1]
	}
	return out
}

// Shared is an approximate index with its replicas' claims: a lookup merges both, so a
// prefix another replica dispatched is found here too.
type Shared struct {
	local *Approx
	store Store
}

// NewShared returns local shared through store.
func NewShared(local *Approx, store Store) *Shared { return &Shared{local: local, store: store} }

// Local is the replica's own index.
func (s *Shared) Local() *Approx { return s.local }

// Lookup returns, for each engine of the model the local index tracks, the longest
// prefix of hashes it holds by the local index or the store's claims, in blocks. shared
// is false when the store did not answer and the result is the local index's alone.
func (s *Shared) Lookup(model string, hashes []int64) (ms []Match, shared bool) {
	ms = s.local.Lookup(model, hashes)
	cps := Checkpoints(hashes)
	if len(cps) == 0 {
		return ms, true
	}
	holders, ok := s.store.Holders(cps)
	if !ok {
		return ms, false
	}
	for i, engines := range holders {
		blocks := (i + 1) * CheckpointStride
		for _, e := range engines {
			if s.local.serves(model, e) {
				ms = longest(ms, e, blocks)
			}
		}
	}
	return ms, true
}

// longest raises the engine's match in ms to blocks, adding it if absent.
func longest(ms []Match, engine string, blocks int) []Match {
	for i := range ms {
		if ms[i].Engine == engine {
			ms[i].Blocks = max(ms[i].Blocks, blocks)
			return ms
		}
	}
	return append(ms, Match{Engine: engine, Blocks: blocks})
}

// Claim tells the other replicas that the engine is about to hold the prompt: it is
// called as the dispatch starts, so that the prompt's next turn, which can only follow
// its answer, finds the claim on any replica.
func (s *Shared) Claim(engineID string, hashes []int64) {
	if cps := Checkpoints(hashes); len(cps) > 0 && s.local.Has(engineID) {
		s.store.Claim(engineID, cps)
	}
}

// Unclaim withdraws a claim whose dispatch failed, so that an engine refusing work does
// not attract more of it on any replica.
func (s *Shared) Unclaim(engineID string, hashes []int64) {
	if cps := Checkpoints(hashes); len(cps) > 0 && s.local.Has(engineID) {
		s.store.Unclaim(engineID, cps)
	}
}
