//go:build !kvgomap

package kv

import "testing"

// TestTableShrinksOnReset checks that reset lets the slots go, so a cleared rank's
// memory returns.
func TestTableShrinksOnReset(t *testing.T) {
	var tab table[int]
	for i := range int64(1000) {
		tab.put(i, int(i))
	}
	if tab.len() != 1000 || len(tab.slots) < 1000 {
		t.Fatalf("len %d in %d slots", tab.len(), len(tab.slots))
	}
	tab.reset()
	if tab.len() != 0 || tab.slots != nil {
		t.Fatalf("after reset: len %d, %d slots", tab.len(), len(tab.slots))
	}
	if _, ok := tab.get(5); ok {
		t.Fatal("get after reset found an entry")
	}
}
