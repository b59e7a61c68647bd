//go:build !kvgomap

package kv

import (
	"math/bits"
	"math/rand/v2"
)

// table is a hash table of int64 keys, open-addressed with linear probing, for the
// index's two large maps (a rank's engine hashes, the router's blocks). At 10 000 blocks
// a second their probes were two thirds of what applying KV events cost the router
// (docs/benchmarks.md, "KV-event indexing cost"): a Go map's probe of a large map reads
// its directory, its table, the group's control word and then the slot, each a likely
// cache miss in a router doing other work, where a probe here reads the slot the key
// hashes to and, rarely, the next. Removal shifts later entries back (no tombstones), so
// a table churned at a constant size keeps short probes.
//
// Building with -tags kvgomap puts Go maps back in its place (table_gomap.go), the
// switch back; make test runs the package's tests both ways.
//
// The keys are hashes a peer chooses; the table hashes them again with a per-table
// random seed, so a publisher cannot aim its keys at one run of slots.
type table[V any] struct {
	slots []slot[V] // a power of two of them, or none
	n     int       // full slots
	seed  [2]uint64
	// Key 0 marks an empty slot; the entry of key 0 itself is kept aside.
	zero    V
	hasZero bool
}

type slot[V any] struct {
	key int64
	val V
}

// minSlots is a table's size when its first entry is put.
const minSlots = 16

func (t *table[V]) len() int {
	if t.hasZero {
		return t.n + 1
	}
	return t.n
}

// home is the slot key hashes to: the two halves of a 128-bit product of the key and the
// seed folded together, as the runtime's fallback hash of 8 bytes mixes them.
func (t *table[V]) home(key int64) int {
	hi, lo := bits.Mul64(uint64(key)^t.seed[0], t.seed[1])
	return int(hi^lo) & (len(t.slots) - 1)
}

// find returns the slot holding key, or the empty slot where it would go, and whether key
// is there. The table has at least one empty slot.
func (t *table[V]) find(key int64) (int, bool) {
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case key:
			return i, true
		case 0:
			return i, false
		}
	}
}

// touch reads the slot key hashes to and returns its key, for warm (store.go): reading
// ahead of the probes that follow, so that their cache misses overlap.
func (t *table[V]) touch(key int64) int64 {
	if len(t.slots) == 0 {
		return 0
	}
	return t.slots[t.home(key)].key
}

// get returns key's value, or the zero V and false.
func (t *table[V]) get(key int64) (V, bool) {
	if key == 0 {
		return t.zero, t.hasZero
	}
	if t.n > 0 {
		if i, ok := t.find(key); ok {
			return t.slots[i].val, true
		}
	}
	var none V
	return none, false
}

// ref returns a pointer to key's value, nil if absent. It is valid until the next put or
// remove.
func (t *table[V]) ref(key int64) *V {
	if key == 0 {
		if t.hasZero {
			return &t.zero
		}
		return nil
	}
	if t.n > 0 {
		if i, ok := t.find(key); ok {
			return &t.slots[i].val
		}
	}
	return nil
}

// put sets key's value.
func (t *table[V]) put(key int64, v V) {
	p, _ := t.upsert(key)
	*p = v
}

// upsert returns a pointer to key's value, adding key with the zero V if absent, and
// whether it was there: one probe where a get and a put would take two. The pointer is
// valid until the next upsert, put or remove.
func (t *table[V]) upsert(key int64) (*V, bool) {
	if key == 0 {
		had := t.hasZero
		t.hasZero = true
		return &t.zero, had
	}
	if 4*(t.n+1) > 3*len(t.slots) { // at most three quarters full
		t.grow()
	}
	i, ok := t.find(key)
	if !ok {
		t.slots[i].key = key
		t.n++
	}
	return &t.slots[i].val, ok
}

// grow doubles the slots and puts every entry again.
func (t *table[V]) grow() {
	old := t.slots
	if old == nil {
		t.seed = [2]uint64{rand.Uint64(), rand.Uint64() | 1}
	}
	t.slots = make([]slot[V], max(2*len(old), minSlots))
	for _, s := range old {
		if s.key != 0 {
			i, _ := t.find(s.key)
			t.slots[i] = s
		}
	}
}

// remove deletes key and reports whether it was there.
func (t *table[V]) remove(key int64) bool {
	if key == 0 {
		had := t.hasZero
		var none V
		t.zero, t.hasZero = none, false
		return had
	}
	if t.n == 0 {
		return false
	}
	i, ok := t.find(key)
	if !ok {
		return false
	}
	// Shift back each later entry of the run whose home is not between the hole and
	// itself, so that every entry stays reachable from its home without a gap.
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].key != 0; j = (j + 1) & mask {
		if h := t.home(t.slots[j].key); (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = slot[V]{}
	t.n--
	return true
}

// each calls f with every entry, in no particular order; f must not change the table.
func (t *table[V]) each(f func(key int64, v V)) {
	if t.hasZero {
		f(0, t.zero)
	}
	for _, s := range t.slots {
		if s.key != 0 {
			f(s.key, s.val)
		}
	}
}

// reset empties the table and lets its slots go.
func (t *table[V]) reset() { *t = table[V]{} }
