package hf

import "testing"

// TestMergeTablePacking puts merges whose ids and ranks fill the bits of a slot, and some
// that collide, and reads each back as it was put; a later put of a pair replaces it.
func TestMergeTablePacking(t *testing.T) {
	const top = maxID - 1
	merges := map[uint64]uint64{
		0:                  0,
		top<<32 | top:      (maxRanks-1)<<32 | top,
		1<<32 | top:        0xABCDEF<<32 | 2,
		top << 32:          0x10203 << 32,
		5<<32 | 7:          1<<32 | 12,
		7<<32 | 5:          2<<32 | 12,
		0x123456<<32 | 0xF: 0xFEFFFF<<32 | 0xFFFF,
	}
	tab := newMergeTable(len(merges))
	for k, v := range merges {
		tab.put(k, 1<<32|1) // replaced below
		tab.put(k, v)
	}
	for k, v := range merges {
		if got := tab.get(uint32(k>>32), uint32(k)); got != v {
			t.Errorf("get(%#x, %#x) = %#x, want %#x", k>>32, uint32(k), got, v)
		}
	}
	if got := tab.get(7, 7); got != noMerge {
		t.Errorf("get(7, 7) = %#x, want noMerge", got)
	}
	n := 0
	tab.each(func(key, val uint64) {
		if n++; merges[key] != val {
			t.Errorf("each gives %#x: %#x, want %#x", key, val, merges[key])
		}
	})
	if n != len(merges) {
		t.Errorf("each gives %d merges, want %d", n, len(merges))
	}
}

// TestMergeFilter holds the filter of Qwen's merge table to its promise: every merge is
// found through it, and it turns away most pairs without a merge (pairs of the ids of
// the merges' parts, taken crosswise, as neighbouring letters make them).
func TestMergeFilter(t *testing.T) {
	tab := loadQwen(t).model.merges
	var lefts, rights []uint32
	tab.each(func(key, val uint64) {
		if got := tab.get(uint32(key>>32), uint32(key)); got != val {
			t.Fatalf("get(%#x, %#x) = %#x, want %#x", key>>32, uint32(key), got, val)
		}
		lefts, rights = append(lefts, uint32(key>>32)), append(rights, uint32(key))
	})
	none, passed := 0, 0
	for i := range lefts {
		a, b := lefts[i], rights[(i*7919+13)%len(rights)]
		if tab.get(a, b) != noMerge {
			continue
		}
		none++
		if w, set := tab.filterBits(uint64(a)<<32 | uint64(b)); tab.filter[w]&set == set {
			passed++
		}
	}
	if none == 0 || passed*10 > none {
		t.Errorf("the filter lets %d of %d pairs without a merge through, want under a tenth", passed, none)
	}
	t.Logf("%d merges, filter of %d KB lets %d of %d pairs without a merge through", len(lefts), len(tab.filter)*8>>10, passed, none)
}
