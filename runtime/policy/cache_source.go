package policy

import (
	"context"
	"errors"
	"sync"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/token"
)

// CacheSource answers the cache-aware policy's prefix-ownership lookups: the local index
// fed by KV events, or a remote indexer. It normalises both into one result, in tokens.
//
// Sources are compared as map keys by the per-request memo, so implementations must be
// comparable, and two sources over the same shared index or client must be equal.
type CacheSource interface {
	// Name is the source's kind as traces report it: "local_index" or "remote_indexer".
	Name() string
	// Lookup returns how many leading tokens of ids each engine of the model holds. An
	// error means the query itself is invalid and stops routing; a source that cannot
	// answer returns a result marked Unavailable instead.
	Lookup(ctx context.Context, model string, ids []uint32) (PrefixResult, error)
}

// PrefixResult is a prefix lookup's answer for every engine of a model.
type PrefixResult struct {
	// Matched maps an engine id to the length in tokens of the request prefix it holds;
	// engines holding nothing are absent. Each cache-aware policy keeps the entries of
	// its own candidates.
	Matched map[string]int64
	// Unavailable is set when the source could not answer; Detail says why. Like a miss it
	// leads to the load fallback, but traces tell the two apart.
	Unavailable bool
	Detail      string
}

// LocalIndex returns the source reading the router's own prefix index. A nil index
// answers every lookup with a miss.
func LocalIndex(ix *kv.Index) CacheSource { return localSource{ix} }

type localSource struct{ ix *kv.Index }

func (localSource) Name() string { return "local_index" }

func (s localSource) Lookup(_ context.Context, model string, ids []uint32) (PrefixResult, error) {
	var res PrefixResult
	for _, bs := range s.ix.BlockSizes(model) {
		res.add(s.ix.Lookup(ids, bs), bs)
	}
	return res, nil
}

// RemoteIndexer returns the source querying a remote prefix indexer.
func RemoteIndexer(r *kv.Remote) CacheSource { return remoteSource{r} }

type remoteSource struct{ r *kv.Remote }

func (remoteSource) Name() string { return "remote_indexer" }

func (s remoteSource) Lookup(ctx context.Context, model string, ids []uint32) (PrefixResult, error) {
	var res PrefixResult
	for _, bs := range s.r.BlockSizes(model) {
		hashes := token.BlockHashes(ids, bs)
		if len(hashes) == 0 {
			continue
		}
		ms, err := s.r.Query(ctx, model, bs, hashes)
		if errors.Is(err, kv.ErrUnavailable) {
			return PrefixResult{Unavailable: true, Detail: err.Error()}, nil
		}
		if err != nil {
			return PrefixResult{}, err
		}
		res.add(ms, bs)
	}
	return res, nil
}

// add records matches of blocks of size bs, in tokens. A block count converts to tokens
// only with its page size, which is why sources report blocks per size.
func (r *PrefixResult) add(ms []kv.Match, bs int) {
	for _, m := range ms {
		if r.Matched == nil {
			r.Matched = make(map[string]int64, len(ms))
		}
		r.Matched[m.Engine] = max(r.Matched[m.Engine], int64(m.Blocks)*int64(bs))
	}
}

// outcome is the trace's name for the result.
func (r *PrefixResult) outcome() string {
	switch {
	case r.Unavailable:
		return decision.PrefixUnavailable
	case len(r.Matched) > 0:
		return decision.PrefixHit
	default:
		return decision.PrefixMiss
	}
}

// prefixMemo holds one request's prefix lookups, keyed by source, so that the request's
// bucket attempts and PD stages query each source once (docs/design.md, Prefix state).
// Misses and unavailable answers are kept too. It memoizes only the lookup: every pick
// still applies its own candidates, gates and admission to the result.
type prefixMemo struct {
	mu      sync.Mutex
	entries []memoEntry // a request rarely uses more than one source
	first   [1]memoEntry
}

type memoEntry struct {
	src CacheSource
	res PrefixResult
	err error
}

// lookupPrefix asks src once per pass: through the pass's memo if it has one (see
// Pass.Start).
func lookupPrefix(ctx context.Context, pass *Pass, src CacheSource, model string, ids []uint32) (PrefixResult, error) {
	var memo *prefixMemo
	if pass != nil {
		memo = pass.memo
	}
	if memo == nil {
		return src.Lookup(ctx, model, ids)
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	for _, e := range memo.entries {
		if e.src == src {
			return e.res, e.err
		}
	}
	res, err := src.Lookup(ctx, model, ids)
	memo.entries = append(memo.entries, memoEntry{src: src, res: res, err: err})
	return res, err
}
