package gcpace

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, MaxPercent},       // before the first collection
		{10 * mb, MaxPercent}, // 1280% capped
		{32 * mb, MaxPercent}, // exactly 400%
		{40 * mb, 300},        // 320% rounded down
		{64 * mb, 200},        // goal 192 MB: 128 above the live heap
		{100 * mb, 125},       // 128%
		{128 * mb, 100},       // the floor reached: Go's default
		{1024 * mb, 100},      // never below the default
	} {
		if got := Percent(tc.live, MaxFloor); got != tc.want {
			t.Errorf("Percent(%d MB) = %d, want %d", tc.live/mb, got, tc.want)
		}
	}
}

// TestStepSetsOnlyChanges: the percentage follows the live heap, and an unchanged
// percentage is not set again.
func TestStepSetsOnlyChanges(t *testing.T) {
	live := uint64(10 << 20)
	var sets []int
	p := &Pacer{MinFloor: MaxFloor, MaxFloor: MaxFloor, Live: func() uint64 { return live }, Set: func(v int) int { sets = append(sets, v); return 100 },
		Largest: func() int64 { return 0 }, Allocated: func() uint64 { return 0 }, Release: func() {}}
	p.Step()
	p.Step()
	live = 64 << 20
	p.Step()
	live = 65 << 20 // still 196%: rounds to 175
	p.Step()
	live = 66 << 20
	p.Step()
	want := []int{400, 200, 175}
	if len(sets) != len(want) {
		t.Fatalf("sets %v, want %v", sets, want)
	}
	for i := range want {
		if sets[i] != want[i] {
			t.Fatalf("sets %v, want %v", sets, want)
		}
	}
}

// TestRunPacesAndRestores: Run sets the percentage at once, follows the live heap at the
// next tick, and restores the percentage the process had when it stops. The bubble's clock
// moves only when every goroutine in it is blocked, so each tick is exact.
func TestRunPacesAndRestores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		live, cur := uint64(10<<20), 100
		p := &Pacer{MinFloor: MaxFloor, MaxFloor: MaxFloor, Largest: func() int64 { return 0 },
			Allocated: func() uint64 { return 0 }, Release: func() {},
			Live: func() uint64 { mu.Lock(); defer mu.Unlock(); return live },
			Set:  func(v int) int { mu.Lock(); defer mu.Unlock(); prev := cur; cur = v; return prev }}
		read := func() int { mu.Lock(); defer mu.Unlock(); return cur }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { p.Run(ctx, time.Second); close(done) }()
		synctest.Wait()
		if got := read(); got != MaxPercent {
			t.Fatalf("percentage %d when Run started, want %d at once", got, MaxPercent)
		}
		mu.Lock()
		live = 64 << 20
		mu.Unlock()
		time.Sleep(time.Second - time.Nanosecond)
		synctest.Wait()
		if got := read(); got != MaxPercent {
			t.Fatalf("percentage %d before the tick, want %d still", got, MaxPercent)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := read(); got != 200 {
			t.Fatalf("percentage %d after the tick, want 200 for a 64 MB live heap", got)
		}
		cancel()
		<-done
		if got := read(); got != 100 {
			t.Fatalf("percentage %d after the pacer stopped, want the previous 100", got)
		}
	})
}

// TestFloorFollowsTheLargestBody: the floor is FloorPerByte times the largest body noted
// in the last Hold, within its bounds; a larger body raises it at the next step and
// restarts the hold, and a smaller one lowers it only once the hold has passed.
func TestFloorFollowsTheLargestBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const mb = 1 << 20
		p := New()
		step := func(body int, want uint64) {
			t.Helper()
			Note(body)
			if got := p.floor(); got != want {
				t.Fatalf("floor %d MB after a %d-byte body, want %d MB", got/mb, body, want/mb)
			}
		}
		step(300, MinFloor)                // a short chat
		step(256<<10, 64*mb)               // 256 kB × 256
		step(1000, 64*mb)                  // held
		step(2<<20, MaxFloor)              // a long prompt: capped, and the hold restarts
		time.Sleep(Hold - time.Nanosecond) // still held by the long prompt
		step(0, MaxFloor)
		time.Sleep(time.Nanosecond) // the hold has passed: the largest body of this step sets it
		step(200<<10, 50*mb)
		Note(1 << 30) // noted, then read by the next step only
		Note(5)
		if got := p.floor(); got != MaxFloor {
			t.Fatalf("floor %d MB after a 1 GiB body, want the %d MB bound", got/mb, MaxFloor/mb)
		}
	})
}

// TestReleaseOnceIdle: the free heap is released once, at the IdleSteps-th step in a row
// that allocated less than IdleBytes, and again only after a busy step and another idle
// stretch.
func TestReleaseOnceIdle(t *testing.T) {
	var allocated uint64
	released := 0
	p := &Pacer{MinFloor: MaxFloor, MaxFloor: MaxFloor, Live: func() uint64 { return 0 }, Set: func(int) int { return 100 },
		Largest: func() int64 { return 0 }, Allocated: func() uint64 { return allocated }, Release: func() { released++ }}
	steps := func(n int, each uint64) {
		for range n {
			allocated += each
			p.Step()
		}
	}
	steps(IdleSteps-1, IdleBytes-1)
	if released != 0 {
		t.Fatalf("released after %d idle steps, want none before %d", IdleSteps-1, IdleSteps)
	}
	steps(1, 0)
	steps(3*IdleSteps, 0)
	if released != 1 {
		t.Fatalf("released %d times over one idle stretch, want once", released)
	}
	steps(1, IdleBytes) // busy
	steps(IdleSteps, 0)
	if released != 2 {
		t.Fatalf("released %d times after a second idle stretch, want 2", released)
	}
}

// TestLiveHeapReadsTheRuntime: after a collection the runtime reports a live heap.
func TestLiveHeapReadsTheRuntime(t *testing.T) {
	keep := make([]byte, 1<<20)
	runtime.GC()
	if got := liveHeap(); got < 1<<20 {
		t.Fatalf("live heap %d bytes, want at least the 1 MiB kept", got)
	}
	runtime.KeepAlive(keep)
}

// TestSettleReturnsGarbage: garbage dropped before Settle is released to the operating
// system by the time it returns, not left to the background scavenger.
func TestSettleReturnsGarbage(t *testing.T) {
	released := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	func() {
		garbage := make([][]byte, 64)
		for i := range garbage {
			garbage[i] = make([]byte, 1<<20)
		}
		runtime.KeepAlive(garbage)
	}()
	before := released()
	Settle()
	if got := released(); got < before+32<<20 {
		t.Fatalf("released %d bytes before Settle, %d after: want at least 32 MiB of the 64 dropped more", before, got)
	}
}
