package engine

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/routerkit/router/runtime/plan"
)

// Registry is the set of live workers. Reads are lock-free: every change publishes a new
// immutable Snapshot, so selection reads a consistent view with one atomic load and never
// allocates. Changes (discovery, re-registration) are rare and take a mutex.
type Registry struct {
	mu   sync.Mutex // serialises writers
	snap atomic.Pointer[Snapshot]
}

// Snapshot is an immutable view of the registry. Callers must not modify the slices it
// returns. A new Snapshot pointer means the membership changed, so caches keyed by it are
// exact.
type Snapshot struct {
	byID  map[string]*Worker
	byKey map[modelRole][]*Worker // each sorted by id
}

type modelRole struct {
	model string
	role  plan.Role
}

// NewRegistry returns a registry holding the given workers. Duplicate ids are an error,
// because a group references engines by id.
func NewRegistry(workers ...*Worker) (*Registry, error) {
	byID := make(map[string]*Worker, len(workers))
	for _, w := range workers {
		if _, dup := byID[w.id]; dup {
			return nil, fmt.Errorf("registering engine %q: duplicate engine id", w.id)
		}
		byID[w.id] = w
	}
	r := &Registry{}
	r.snap.Store(newSnapshot(byID))
	return r, nil
}

// FromPlan returns a registry with one healthy worker per configured engine.
func FromPlan(engines []plan.Engine) (*Registry, error) {
	ws := make([]*Worker, len(engines))
	for i, e := range engines {
		ws[i] = New(e)
		ws[i].index = i
	}
	return NewRegistry(ws...)
}

func newSnapshot(byID map[string]*Worker) *Snapshot {
	byKey := make(map[modelRole][]*Worker)
	for _, w := range byID {
		k := modelRole{w.model, w.role}
		byKey[k] = append(byKey[k], w)
	}
	for _, ws := range byKey {
		slices.SortFunc(ws, func(a, b *Worker) int { return cmp.Compare(a.id, b.id) })
	}
	return &Snapshot{byID: byID, byKey: byKey}
}

// Snapshot returns the current view.
func (r *Registry) Snapshot() *Snapshot { return r.snap.Load() }

// Get returns the live worker with the id, or nil.
func (r *Registry) Get(id string) *Worker { return r.Snapshot().Get(id) }

// Put registers w, replacing any worker with the same id. The replaced worker keeps its
// identity: selection treats it as foreign from now on.
func (r *Registry) Put(w *Worker) {
	r.update(func(m map[string]*Worker) { m[w.id] = w })
}

// Remove unregisters the worker with the id, if any.
func (r *Registry) Remove(id string) {
	r.update(func(m map[string]*Worker) { delete(m, id) })
}

func (r *Registry) update(change func(map[string]*Worker)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load().byID
	next := make(map[string]*Worker, len(old)+1)
	for id, w := range old {
		next[id] = w
	}
	change(next)
	r.snap.Store(newSnapshot(next))
}

// Get returns the worker with the id, or nil.
func (s *Snapshot) Get(id string) *Worker { return s.byID[id] }

// Workers returns the workers of a model and role sorted by id, healthy or not. The slice
// is shared and must not be modified.
func (s *Snapshot) Workers(model string, role plan.Role) []*Worker {
	return s.byKey[modelRole{model, role}]
}
