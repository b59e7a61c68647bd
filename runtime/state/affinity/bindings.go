package affinity

// Bindings is one namespace of bindings as the session and sticky policies use it. The
// in-process Store implements it, and so does Shared, which keeps the bindings in Redis so
// that every router replica reuses the same admitted binding; a policy cannot tell which
// one it has, so the binding rules live in the policy once.
type Bindings interface {
	// Get returns the engine bound to k, if any, without refreshing the binding.
	Get(k Key) (string, bool)
	// Touch refreshes k's idle timer if k is still bound to engineID, and reports whether
	// it was.
	Touch(k Key, engineID string) bool
	// CompareAndBind binds k to engineID if k's live binding is still old ("" for none)
	// and returns the binding k has afterwards and whether this call wrote it.
	CompareAndBind(k Key, old, engineID string) (current string, bound bool)
}

var (
	_ Bindings = (*Store)(nil)
	_ Bindings = (*Shared)(nil)
)

// put binds k to engineID unconditionally and refreshes it. Shared uses it to keep its
// local copy of what the store answered, which is what it routes with while the store is
// down. The copy is capped like any store (SetMaxKeys).
func (s *Store) put(k Key, engineID string) {
	sh := s.shardOf(k)
	now := s.clock().UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if b := sh.m[k]; b != nil && b.engine == engineID {
		b.lastUsed.Store(now)
		return
	}
	if sh.m[k] == nil && s.shardCap > 0 && len(sh.m) >= s.shardCap {
		s.evict(sh, now)
	}
	nb := &binding{engine: engineID}
	nb.lastUsed.Store(now)
	sh.m[k] = nb
}
