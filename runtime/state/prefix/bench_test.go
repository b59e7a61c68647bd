package prefix

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// benchEngines is the fleet of the benchmarks: 8 engines of one model.
const benchEngines = 8

// fullIndex returns an index of benchEngines engines holding entries blocks in all, each
// engine at its capacity, with a settable clock.
func fullIndex(entries int) (*Approx, *clock) {
	var es []Engine
	for i := range benchEngines {
		es = append(es, Engine{ID: fmt.Sprintf("E%d", i), Model: "m"})
	}
	c := newClock()
	per := entries / benchEngines
	a := New(Config{CapacityTokens: int64(per) * 16, TTL: time.Hour, BlockSize: 16}, es, c.now)
	prompt := make([]int64, 64)
	for i, e := range es {
		for j := 0; j < per; j += len(prompt) {
			for k := range prompt {
				prompt[k] = int64(i)<<40 | int64(j+k)
			}
			a.Insert(e.ID, prompt)
		}
	}
	return a, c
}

// BenchmarkApprox reports, at 10^5 and 10^6 entries over 8 engines: the heap bytes per
// entry of a full index; the cost of inserting a 64-block (1024-token) prompt into a full
// engine, which evicts 64 entries; and the cost of looking up a 64-block prompt one
// engine holds.
func BenchmarkApprox(b *testing.B) {
	for _, entries := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d/memory", entries), func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				a, _ := fullIndex(entries)
				runtime.GC()
				runtime.ReadMemStats(&after)
				n := 0
				for i := range benchEngines {
					n += a.Blocks(fmt.Sprintf("E%d", i))
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/entry")
				runtime.KeepAlive(a)
			}
		})
		a, c := fullIndex(entries)
		prompt := make([]int64, 64)
		b.Run(fmt.Sprintf("entries=%d/insert64", entries), func(b *testing.B) {
			b.ReportAllocs()
			next := int64(1) << 50
			for b.Loop() {
				for k := range prompt {
					prompt[k] = next
					next++
				}
				a.Insert("E3", prompt)
				c.advance(time.Microsecond)
			}
		})
		held := make([]int64, 64)
		for k := range held {
			held[k] = 5<<40 | int64(k)
		}
		a.Insert("E5", held)
		b.Run(fmt.Sprintf("entries=%d/lookup64", entries), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ms := a.Lookup("m", held); len(ms) != 1 || ms[0].Blocks != 64 {
					b.Fatalf("Lookup = %v", ms)
				}
			}
		})
	}
}
