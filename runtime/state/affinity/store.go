// Package affinity holds the router's affinity bindings: which engine a session or routing
// key prefers within one engine group (docs/design.md, Affinity state).
//
// A binding records preferred placement, not successful execution, so it is written once a
// policy has admitted the engine and is kept even if a later PD stage or the dispatch fails.
// The store owns scoping, idle expiry, worker invalidation and atomic updates; the session
// and sticky policies decide when to reuse or replace a binding.
package affinity

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// Key scopes a binding: the same session key maps independently per model, bucket and
// stage, so a PD request keeps one prefill and one decode binding per bucket.
type Key struct {
	Model  string
	Bucket string
	Stage  plan.Role
	// Value is the session id or routing key taken from the request header.
	Value string
}

// DefaultIdle is the idle expiry of stores built without one, matching the configuration
// defaults session_idle_secs and sticky_idle_secs.
const DefaultIdle = 600 * time.Second

// shards spreads keys over independently locked maps, so concurrent picks for different
// keys rarely contend. A power of two keeps the shard choice a mask.
const shards = 32

// Store is one namespace of bindings with a single idle timeout. It is safe for concurrent
// use. Expired bindings are invisible at once; Sweep frees their memory.
type Store struct {
	idle  time.Duration
	clock func() time.Time
	seed  maphash.Seed
	// shardCap bounds each shard's bindings (0: unbounded); see evict.
	shardCap int
	shard    [shards]shard
}

type shard struct {
	mu sync.RWMutex
	m  map[Key]*binding
}

// binding is one key's engine. lastUsed is a clock reading in Unix nanoseconds, atomic so
// that reuse refreshes it under the shard's read lock.
type binding struct {
	engine   string
	lastUsed atomic.Int64
}

// NewStore returns an empty store whose bindings expire after idle without use. clock is
// the time source for expiry; nil means time.Now. A non-positive idle means DefaultIdle.
func NewStore(idle time.Duration, clock func() time.Time) *Store {
	if idle <= 0 {
		idle = DefaultIdle
	}
	if clock == nil {
		clock = time.Now
	}
	s := &Store{idle: idle, clock: clock, seed: maphash.MakeSeed()}
	for i := range s.shard {
		s.shard[i].m = make(map[Key]*binding)
	}
	return s
}

func (s *Store) shardOf(k Key) *shard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.Model)
	h.WriteByte(0)
	h.WriteString(k.Bucket)
	h.WriteByte(0)
	h.WriteString(string(k.Stage))
	h.WriteByte(0)
	h.WriteString(k.Value)
	return &s.shard[h.Sum64()&(shards-1)]
}

func (s *Store) live(b *binding, now int64) bool {
	return b != nil && now-b.lastUsed.Load() <= int64(s.idle)
}

// Get returns the engine id bound to k, if a binding exists and has not expired. It does
// not refresh the binding: a policy refreshes with Touch once the engine is admitted.
func (s *Store) Get(k Key) (string, bool) {
	sh := s.shardOf(k)
	now := s.clock().UnixNano()
	sh.mu.RLock()
	b := sh.m[k]
	ok := s.live(b, now)
	sh.mu.RUnlock()
	if !ok {
		return "", false
	}
	return b.engine, true
}

// Touch refreshes k's idle timer if k is still bound to engineID, and reports whether it
// was.
func (s *Store) Touch(k Key, engineID string) bool {
	sh := s.shardOf(k)
	now := s.clock().UnixNano()
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	b := sh.m[k]
	if !s.live(b, now) || b.engine != engineID {
		return false
	}
	b.lastUsed.Store(now)
	return true
}

// CompareAndBind binds k to engineID if k's live binding is still old, where "" means no
// live binding. It returns the binding k has afterwards and whether this call wrote it.
//
// This is how concurrent first assignments converge: of several picks that saw no binding
// and each chose an engine, exactly one writes; the others get the winner back and must
// check it themselves. A caller replacing a binding that left its group passes that
// binding as old, so a replacement someone else wrote in between is not overwritten.
func (s *Store) CompareAndBind(k Key, old, engineID string) (current string, bound bool) {
	sh := s.shardOf(k)
	now := s.clock().UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.m[k]
	cur := ""
	if s.live(b, now) {
		cur = b.engine
	}
	if cur != old {
		return cur, false
	}
	if b == nil && s.shardCap > 0 && len(sh.m) >= s.shardCap {
		s.evict(sh, now)
	}
	nb := &binding{engine: engineID}
	nb.lastUsed.Store(now)
	sh.m[k] = nb
	return engineID, true
}

// Sweep removes the bindings idle at now and returns how many it removed. Expired
// bindings are already ignored by Get; sweeping only frees their memory, which is why the
// caller owns its cadence (see Stores.Run).
func (s *Store) Sweep(now time.Time) int {
	n := 0
	at := now.UnixNano()
	for i := range s.shard {
		sh := &s.shard[i]
		sh.mu.Lock()
		for k, b := range sh.m {
			if !s.live(b, at) {
				delete(sh.m, k)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// RemoveEngine drops every binding to the engine, for a worker that left the registry,
// and returns how many it dropped. Sessions bound to it get a new engine on their next pick.
func (s *Store) RemoveEngine(engineID string) int {
	n := 0
	for i := range s.shard {
		sh := &s.shard[i]
		sh.mu.Lock()
		for k, b := range sh.m {
			if b.engine == engineID {
				delete(sh.m, k)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Len returns the number of stored bindings, expired or not.
func (s *Store) Len() int {
	n := 0
	for i := range s.shard {
		sh := &s.shard[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}
