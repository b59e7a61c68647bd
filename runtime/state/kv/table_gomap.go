//go:build kvgomap

package kv

// table is the switch back to Go maps for the index's two large maps: built with
// -tags kvgomap, it stands in for the open-addressed table of table.go, with the same
// methods and answers. A value lives behind a pointer so that ref and upsert can hand
// it out, as the table hands out its slot.
type table[V any] struct{ m map[int64]*V }

func (t *table[V]) len() int { return len(t.m) }

// touch reads nothing ahead: a Go map's probe cannot be split from its read.
func (t *table[V]) touch(int64) int64 { return 0 }

func (t *table[V]) get(key int64) (V, bool) {
	if p := t.m[key]; p != nil {
		return *p, true
	}
	var none V
	return none, false
}

func (t *table[V]) ref(key int64) *V { return t.m[key] }

func (t *table[V]) put(key int64, v V) {
	p, _ := t.upsert(key)
	*p = v
}

func (t *table[V]) upsert(key int64) (*V, bool) {
	if p := t.m[key]; p != nil {
		return p, true
	}
	if t.m == nil {
		t.m = map[int64]*V{}
	}
	p := new(V)
	t.m[key] = p
	return p, false
}

func (t *table[V]) remove(key int64) bool {
	_, ok := t.m[key]
	delete(t.m, key)
	return ok
}

func (t *table[V]) each(f func(key int64, v V)) {
	for k, p := range t.m {
		f(k, *p)
	}
}

func (t *table[V]) reset() { *t = table[V]{} }
