package affinity

import (
	"fmt"
	"testing"
	"time"
)

// Bounded state: a client inventing keys cannot grow a store past its cap, and the
// bindings that go are the least recently used.
func TestStoreCapEvictsLeastRecentlyUsed(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewStore(time.Hour, func() time.Time { return now })
	s.SetMaxKeys(320) // 10 per shard
	hot := Key{Model: "m", Value: "hot"}
	s.CompareAndBind(hot, "", "E1")
	for i := range 10_000 {
		now = now.Add(time.Millisecond)
		s.CompareAndBind(Key{Model: "m", Value: fmt.Sprint("flood-", i)}, "", "E2")
		if i%50 == 0 {
			s.Touch(hot, "E1") // in use all along
		}
	}
	if n := s.Len(); n > 320 {
		t.Errorf("store holds %d bindings, cap 320", n)
	}
	if e, ok := s.Get(hot); !ok || e != "E1" {
		t.Error("a binding in use was evicted before idle ones")
	}
	if _, ok := s.Get(Key{Model: "m", Value: "flood-0"}); ok {
		t.Error("the oldest binding survived the flood")
	}
}
