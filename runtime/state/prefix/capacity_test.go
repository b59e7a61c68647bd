package prefix

import (
	"testing"
	"time"
)

// TestReportedCapacitySizesEachEngine: without a configured capacity, each engine's entry
// is sized by what it reports, shrinks (evicting its least recent blocks) when the report
// shrinks, and an engine that has not reported has the default.
func TestReportedCapacitySizesEachEngine(t *testing.T) {
	c := newClock()
	reported := map[string]int64{}
	a := New(Config{TTL: time.Hour, BlockSize: 16, Reported: func(id string) int64 { return reported[id] }}, twoEngines, c.now)
	if got := a.CapacityBlocks("A"); got != DefaultCapacityTokens/16 {
		t.Fatalf("before any report: %d blocks, want the default %d", got, DefaultCapacityTokens/16)
	}
	reported["A"] = 4800 // llm-d-inference-sim's --kv-cache-size 300 × 16
	reported["B"] = 0    // a report without capacity says nothing
	if got := a.CapacityBlocks("A"); got != 300 {
		t.Fatalf("after a 4800-token report: %d blocks, want 300", got)
	}
	if got := a.CapacityBlocks("B"); got != DefaultCapacityTokens/16 {
		t.Fatalf("B after an empty report: %d blocks, want the default", got)
	}
	a.Insert("A", seq(1, 200))
	c.advance(time.Second)
	a.Insert("A", seq(1000, 50)) // most recent
	reported["A"] = 100 * 16
	a.Insert("B", seq(5000, 1)) // another engine's insert resizes only its own entry
	if got := a.Blocks("A"); got != 250 {
		t.Fatalf("before A's next insert or size query: %d held, want 250", got)
	}
	if got := a.CapacityBlocks("A"); got != 100 {
		t.Fatalf("after a 1600-token report: %d blocks, want 100", got)
	}
	if got := a.Blocks("A"); got != 100 {
		t.Fatalf("after shrinking to 100 blocks: %d held", got)
	}
	if ms := a.Lookup("m", seq(1000, 50)); len(ms) != 1 || ms[0].Blocks != 50 {
		t.Fatalf("the most recent prompt after shrinking: %v, want all 50 blocks on A", ms)
	}
	if ms := a.Lookup("m", seq(1, 200)); len(ms) != 1 || ms[0].Blocks != 50 {
		t.Fatalf("the older prompt after shrinking: %v, want its 50 leading blocks on A (tails go first)", ms)
	}
}

// TestConfiguredCapacityWins: capacity_tokens set in the configuration overrides reports.
func TestConfiguredCapacityWins(t *testing.T) {
	a := New(Config{CapacityTokens: 1600, BlockSize: 16, Reported: func(string) int64 { return 4800 }}, twoEngines, nil)
	if got := a.CapacityBlocks("A"); got != 100 {
		t.Fatalf("%d blocks, want the configured 100", got)
	}
}
