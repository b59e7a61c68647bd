package affinity

import "slices"

// DefaultMaxKeys bounds a store built without a cap, matching the configuration default
// state.affinity_max_keys.
const DefaultMaxKeys = 100_000

// SetMaxKeys caps the store at about n bindings, so clients inventing session ids or
// routing keys cannot grow it without bound; beyond it the least recently used bindings
// go. Call it before the store is shared. n <= 0 means DefaultMaxKeys.
func (s *Store) SetMaxKeys(n int) {
	if n <= 0 {
		n = DefaultMaxKeys
	}
	s.shardCap = max((n+shards-1)/shards, 1)
}

// evict makes room in a full shard, under its write lock: expired bindings first, then
// the least recently used sixteenth of the shard, so the sort is paid once per many
// inserts rather than on each.
func (s *Store) evict(sh *shard, now int64) {
	for k, b := range sh.m {
		if !s.live(b, now) {
			delete(sh.m, k)
		}
	}
	if len(sh.m) < s.shardCap {
		return
	}
	type aged struct {
		k    Key
		used int64
	}
	all := make([]aged, 0, len(sh.m))
	for k, b := range sh.m {
		all = append(all, aged{k, b.lastUsed.Load()})
	}
	slices.SortFunc(all, func(a, b aged) int { return int(min(max(a.used-b.used, -1), 1)) })
	drop := max(len(all)/16, len(all)-s.shardCap+1)
	for _, a := range all[:drop] {
		delete(sh.m, a.k)
	}
}
