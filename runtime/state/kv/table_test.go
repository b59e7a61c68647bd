package kv

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// checkTable applies ops to a table and to a Go map and fails where they disagree. Each op
// is a key (from a small set, so entries collide and runs form) and whether to remove it.
func checkTable(t *testing.T, ops []uint16) {
	t.Helper()
	var tab table[int]
	want := map[int64]int{}
	for n, op := range ops {
		key := int64(op>>1) - 1000 // negative, zero and positive keys
		if op&1 == 1 {
			_, had := want[key]
			delete(want, key)
			if got := tab.remove(key); got != had {
				t.Fatalf("op %d: remove(%d) = %v, want %v", n, key, got, had)
			}
		} else {
			want[key] = n
			tab.put(key, n)
		}
		if tab.len() != len(want) {
			t.Fatalf("op %d: len %d, want %d", n, tab.len(), len(want))
		}
		if v, ok := tab.get(key); v != want[key] || ok != (op&1 == 0) {
			t.Fatalf("op %d: get(%d) = %d, %v; want %d", n, key, v, ok, want[key])
		}
	}
	seen := 0
	tab.each(func(key int64, v int) {
		seen++
		if w, ok := want[key]; !ok || w != v {
			t.Fatalf("each gave %d=%d, the map has %d (%v)", key, v, w, ok)
		}
		if p := tab.ref(key); p == nil || *p != v {
			t.Fatalf("ref(%d) = %v, want %d", key, p, v)
		}
	})
	if seen != len(want) {
		t.Fatalf("each gave %d entries, want %d", seen, len(want))
	}
	for key := int64(-1000); key < 4096; key++ {
		_, want := want[key]
		if _, ok := tab.get(key); ok != want {
			t.Fatalf("get(%d) = %v after the ops, want %v", key, ok, want)
		}
	}
}

// TestTableMatchesMap runs random puts and removes against a Go map, with keys from a
// range small enough that removals shift runs of colliding entries back.
func TestTableMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, keys := range []int{8, 100, 3000} {
		ops := make([]uint16, 20_000)
		for i := range ops {
			ops[i] = uint16(r.IntN(keys))<<1 | uint16(r.IntN(2))
		}
		checkTable(t, ops)
	}
}

func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 0, 2, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ops := make([]uint16, 0, len(b)/2)
		for ; len(b) >= 2; b = b[2:] {
			ops = append(ops, binary.LittleEndian.Uint16(b)%8192)
		}
		checkTable(t, ops)
	})
}
