package queue

import (
	"math"
	"testing"
	"time"
)

// The bucket starts full, refills at its rate up to its burst, and says how long the
// next token takes.
func TestBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBucket(Rate{PerSecond: 10, Burst: 3}, t0)
	for i := range 3 {
		if !b.take(t0) {
			t.Fatalf("token %d of a full bucket of 3 refused", i)
		}
	}
	if b.take(t0) {
		t.Fatal("an empty bucket gave a token")
	}
	if d := b.until(t0.Add(30 * time.Millisecond)); d != 70*time.Millisecond {
		t.Errorf("until = %v 30ms after emptying at 10/s, want 70ms", d)
	}
	if !b.take(t0.Add(100*time.Millisecond)) || b.take(t0.Add(100*time.Millisecond)) {
		t.Error("100ms at 10/s must earn exactly one token")
	}
	// An hour idle fills it to its burst, not beyond.
	later := t0.Add(time.Hour)
	n := 0
	for b.take(later) {
		n++
	}
	if n != 3 {
		t.Errorf("after an hour idle the bucket gave %d tokens, want its burst 3", n)
	}
	never := newBucket(Rate{PerSecond: 0, Burst: 1}, t0)
	never.take(t0)
	if d := never.until(t0.Add(time.Hour)); d != math.MaxInt64 {
		t.Errorf("a rate of 0 refills in %v, want never", d)
	}
}
