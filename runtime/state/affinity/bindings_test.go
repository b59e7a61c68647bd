package affinity

import (
	"strconv"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// The local copy a shared store keeps is capped like any store: a client inventing keys
// grows the Redis keyspace (bounded by expiry) but not each replica's memory.
func TestPutHonoursTheCap(t *testing.T) {
	c := &clock{now: t0}
	s := NewStore(time.Minute, c.Now)
	s.SetMaxKeys(64)
	for i := range 10_000 {
		s.put(Key{Model: "m", Bucket: "b", Stage: plan.RolePlain, Value: strconv.Itoa(i)}, "E")
	}
	if n := s.Len(); n > 64+shards {
		t.Fatalf("the local copy holds %d bindings, want about the cap of 64", n)
	}
	last := Key{Model: "m", Bucket: "b", Stage: plan.RolePlain, Value: "9999"}
	if got, ok := s.Get(last); !ok || got != "E" {
		t.Fatal("the newest binding was evicted")
	}
	// Putting the same engine again refreshes; another engine replaces.
	s.put(last, "F")
	if got, _ := s.Get(last); got != "F" {
		t.Fatalf("put did not replace: %q", got)
	}
}
