package wait

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestUntilReturnsOnceTheConditionHolds: the condition is polled until it holds, and
// not again after.
func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	polls := 0
	if !Until(func() bool { polls++; return polls == 3 }) {
		t.Fatal("Until gave up on a condition that held at the third poll")
	}
	if polls != 3 {
		t.Fatalf("%d polls, want 3", polls)
	}
}

// TestUntilGivesUpAfterTimeout: in a bubble whose clock only moves when every goroutine
// sleeps, a condition that never holds is given up on at Timeout, not before.
func TestUntilGivesUpAfterTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if Until(func() bool { return false }) {
			t.Fatal("Until reported a condition that never held")
		}
		if waited := time.Since(start); waited < Timeout || waited > Timeout+interval {
			t.Fatalf("gave up after %v, want %v", waited, Timeout)
		}
	})
}
