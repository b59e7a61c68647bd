package token

import "testing"

func TestIDsHaveRoom(t *testing.T) {
	for _, n := range []int{0, 1, 1 << minPooledClass, 1<<minPooledClass + 1, 750_000, 1 << maxPooledClass, 1<<maxPooledClass + 1} {
		ids := IDs(n)
		if len(ids) != 0 || cap(ids) < n {
			t.Fatalf("IDs(%d): len %d cap %d", n, len(ids), cap(ids))
		}
		Recycle(append(ids, 7)) // any length goes back; tiny and huge ones are dropped
	}
}

// TestRecycledIDsAreReused: a long prompt's buffer comes back for the next prompt of a
// similar size, emptied. sync.Pool may drop a Put (it does at random under -race), so a
// few rounds are allowed.
func TestRecycledIDsAreReused(t *testing.T) {
	for range 20 {
		ids := IDs(750_000)
		ids = append(ids, 1, 2, 3)
		Recycle(ids)
		again := IDs(600_000)
		if len(again) != 0 {
			t.Fatalf("recycled buffer came back with %d ids", len(again))
		}
		if cap(again) >= 600_000 && &again[:1][0] == &ids[0] {
			return
		}
	}
	t.Fatal("a recycled buffer was never reused")
}
