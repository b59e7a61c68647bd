// Package gcpace paces Go's garbage collector for a router: a small live heap and a high
// allocation rate. A 128k-token prompt makes a few megabytes of garbage (its body, decoded
// text, rendered template, ids), and with Go's default pacing (a collection each time the
// heap doubles) a router whose live heap is 10–30 MB collects every few such requests:
// measured on a 2-core machine, a third of the CPU a long prompt costs the router (see
// docs/benchmarks.md). The pacer keeps the heap goal at least a floor above the live heap
// while that heap is small, by raising the GC percentage up to MaxPercent, and returns to
// Go's default (100) once the live heap reaches the floor: the memory it spends is bounded
// by the floor, not by a multiple of the heap.
//
// The floor follows the requests: FloorPerByte times the largest request body noted
// (Note) in the last Hold, between MinFloor and MaxFloor. Short requests make a few kB
// of garbage each, so a small floor costs a collection every few hundred of them, and the
// router stays near its live heap; a long prompt raises the floor to MaxFloor at once.
// Each collection costs a few milliseconds of CPU whatever the floor (stop-the-world
// phases and mark workers on a 10 MB live heap), so a lower floor trades CPU for memory;
// MinFloor is where that trade was measured (docs/benchmarks.md). A router that has gone
// idle (IdleSteps steps allocating less than IdleBytes each) returns its headroom to the
// operating system once (Settle), so that an idle router holds little more than its live
// heap.
package gcpace

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// Defaults: the floor's bounds and its bytes per byte of the largest recent body, how long
// a body holds the floor up, the highest percentage the pacer may set, and how often it
// reads the live heap. A 128k-token prompt's body (620–890 kB) makes a few MB of garbage:
// 256 bytes of floor per body byte give any body from 512 kB MaxFloor's headroom, as
// every body had before the floor followed them; a short chat (a few hundred bytes) and
// prompts up to 64 kB get MinFloor.
const (
	MinFloor        = 16 << 20
	MaxFloor        = 128 << 20
	FloorPerByte    = 256
	Hold            = time.Minute
	MaxPercent      = 400
	IdleBytes       = 1 << 20
	IdleSteps       = 10
	DefaultInterval = time.Second
	defaultPercent  = 100
)

// largest is the largest body noted since the pacer last read it.
var largest atomic.Int64

// Note records a request body of n bytes for the pacer's floor. It costs an atomic load
// when n is not the largest since the last step.
func Note(n int) {
	for {
		cur := largest.Load()
		if int64(n) <= cur || largest.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

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

// Pacer sets the GC percentage from the live heap and the largest recent body.
type Pacer struct {
	// MinFloor and MaxFloor bound the floor, which is FloorPerByte times the largest body
	// of the last Hold.
	MinFloor, MaxFloor uint64
	Hold               time.Duration
	// Live reads the live heap; Set sets the GC percentage and returns the previous one;
	// Largest returns the largest body noted since it was last called and forgets it;
	// Allocated reads the bytes allocated since the process started; Release returns
	// the free heap to the operating system. New fills them with the runtime's and
	// Note's; tests replace them.
	Live      func() uint64
	Set       func(int) int
	Largest   func() int64
	Allocated func() uint64
	Release   func()
	last      int
	// allocated is Allocated at the last step; idle counts the steps since one that
	// allocated IdleBytes or more.
	allocated uint64
	idle      int
	// held is the body that sets the floor, noted at heldAt.
	held   uint64
	heldAt time.Time
}

// Start paces the runtime's collector until ctx is done, unless the environment sets GOGC
// (an operator's setting wins); it reports whether it does.
func Start(ctx context.Context) bool {
	if _, set := os.LookupEnv("GOGC"); set {
		return false
	}
	go New().Run(ctx, DefaultInterval)
	return true
}

// New returns a pacer of the runtime's collector with the default floors, fed by Note.
func New() *Pacer {
	return &Pacer{MinFloor: MinFloor, MaxFloor: MaxFloor, Hold: Hold, Live: liveHeap, Set: debug.SetGCPercent,
		Largest: func() int64 { return largest.Swap(0) }, Allocated: allocatedBytes, Release: Settle}
}

// floor is the floor now: FloorPerByte times the largest body noted in the last Hold
// (since the step that took it; a larger one restarts the hold), within the bounds.
func (p *Pacer) floor() uint64 {
	now := time.Now()
	if b := uint64(max(p.Largest(), 0)); b >= p.held || now.Sub(p.heldAt) >= p.Hold {
		p.held, p.heldAt = b, now
	}
	return min(max(p.held*FloorPerByte, p.MinFloor), p.MaxFloor)
}

// Step sets the percentage for the live heap and the floor now, when it changed, and
// releases the free heap when the router has just gone idle.
func (p *Pacer) Step() {
	if pct := Percent(p.Live(), p.floor()); pct != p.last {
		p.Set(pct)
		p.last = pct
	}
	a := p.Allocated()
	if a-p.allocated >= IdleBytes {
		p.idle = 0
	} else if p.idle++; p.idle == IdleSteps {
		p.Release()
	}
	p.allocated = a
}

// Run steps every interval until ctx is done, then restores the percentage the process
// had before.
func (p *Pacer) Run(ctx context.Context, interval time.Duration) {
	pct := Percent(p.Live(), p.floor())
	before := p.Set(pct)
	p.last, p.allocated = pct, p.Allocated()
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
// parsing Qwen3's tokenizer makes about 27 MB of garbage beside 7.5 MB it keeps, and
// without Settle that memory stays resident until the background scavenger returns it,
// and the pacer's next reading of the live heap may still count it.
func Settle() { debug.FreeOSMemory() }

// allocatedBytes reads the bytes allocated since the process started.
func allocatedBytes() uint64 { return readUint64("/gc/heap/allocs:bytes") }

// liveHeap reads the bytes the last collection found live.
func liveHeap() uint64 { return readUint64("/gc/heap/live:bytes") }

// readUint64 reads one runtime metric, 0 when the runtime does not have it.
func readUint64(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
