package policy

import "github.com/routerkit/router/runtime/token"

// BlockHashes are a prompt's SGLang block hashes, computed once per page size. Hashing
// is most of what a prefix lookup costs (about 8 µs per 1k tokens, docs/benchmarks.md),
// and a request with speculative entries is hashed by its lookup, its speculative record
// and its record on success: sharing one BlockHashes hashes it once. Not safe for
// concurrent use.
type BlockHashes struct {
	ids    []uint32
	bySize map[int][]int64
}

// NewBlockHashes returns the lazily computed block hashes of ids.
func NewBlockHashes(ids []uint32) *BlockHashes { return &BlockHashes{ids: ids} }

// Of returns the hashes of the prompt's whole pages of bs tokens; nil when it has none.
func (h *BlockHashes) Of(bs int) []int64 {
	if bs <= 0 || len(h.ids) < bs {
		return nil
	}
	if hs, ok := h.bySize[bs]; ok {
		return hs
	}
	if h.bySize == nil {
		h.bySize = map[int][]int64{}
	}
	hs := token.BlockHashes(h.ids, bs)
	h.bySize[bs] = hs
	return hs
}
