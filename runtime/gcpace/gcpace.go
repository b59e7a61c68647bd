// Package gcpace paces Go's garbage collector for a router: a small live heap and a high
// allocation rate. A 128k-token prompt makes a few megabytes of garbage (its body, decoded
// text, rendered template, ids), and with Go's default pacing (a collection each time the
// heap doubles) a router whose live heap is 10–30 MB collects every few such requests:
// measured on a 2-core machine, a third of the CPU a long prompt costs the router (see
// docs/benchmarks.md). The pacer keeps the heap goal at least Floor bytes above the live
// heap while that heap is small, by raising the GC percentage up to MaxPercent, and
// returns to Go's default (100) once the live heap reaches Floor: the memory it spends is
// bounded by Floor, not by a multiple of the heap.
package gcpace

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults: the floor, the highest percentage it may set, and how often the live heap is
// read.
const (
	DefaultFloor    = 128 << 20
	MaxPercent      = 400
	DefaultInterval = time.Second
	defaultPercent  = 100
)

// Percent is the GC percentage that gives a heap of live bytes a goal of at least floor
// bytes above it, between Go's default and MaxPercent, rounded down to a multiple of 25
// so that small changes of the live heap do not reset it.
func Percent(live, floor uint64) int {
	if live == 0 {
		return MaxPercent
	}
	p := floor * 100 / live
	if p >= MaxPercent {
		return MaxPercent
	}
	return max(defaultPercent, int(p)/25*25)
}

// Pacer sets the GC percentage from the live heap.
type Pacer struct {
	Floor uint64
	// Live reads the live heap; Set sets the GC percentage and returns the previous one.
	// New fills them with the runtime's; tests replace them.
	Live func() uint64
	Set  func(int) int
	last int
}

// Start paces the runtime's collector until ctx is done, unless the environment sets GOGC
// (an operator's setting wins); it reports whether it does.
func Start(ctx context.Context) bool {
	if _, set := os.LookupEnv("GOGC"); set {
		return false
	}
	go New(DefaultFloor).Run(ctx, DefaultInterval)
	return true
}

// New returns a pacer of the runtime's collector with the given floor.
func New(floor uint64) *Pacer {
	return &Pacer{Floor: floor, Live: liveHeap, Set: debug.SetGCPercent}
}

// Step sets the percentage for the live heap now, when it changed.
func (p *Pacer) Step() {
	if pct := Percent(p.Live(), p.Floor); pct != p.last {
		p.Set(pct)
		p.last = pct
	}
}

// Run steps every interval until ctx is done, then restores the percentage the process
// had before.
func (p *Pacer) Run(ctx context.Context, interval time.Duration) {
	pct := Percent(p.Live(), p.Floor)
	before := p.Set(pct)
	p.last = pct
	defer p.Set(before)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.Step()
		}
	}
}

// Settle collects and returns the freed memory to the operating system at once. Call it
// after a burst of one-off allocation, such as loading tokenizers at start or on a reload:
// parsing Qwen3's tokenizer makes about 50 MB of garbage beside 8 MB it keeps, and
// without Settle that memory stays resident until the background scavenger returns it,
// and the pacer's next reading of the live heap may still count it.
func Settle() { debug.FreeOSMemory() }

// liveHeap reads the bytes the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
