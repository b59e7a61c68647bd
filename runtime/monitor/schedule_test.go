package monitor

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)

func half() float64 { return 0.5 } // no jitter: every wait is its interval exactly

// TestScheduleLoadStandsInForHealth walks one engine through its states: load polls
// count as health checks only after /health answered, a failed poll brings the probe
// forward, and a failed probe (a draining engine) stops them counting until /health
// answers again.
func TestScheduleLoadStandsInForHealth(t *testing.T) {
	s := newSchedule(500*time.Millisecond, time.Second, half)
	s.start(t0)
	// Phases are half of each interval with this rnd.
	if !s.nextLoad.Equal(t0.Add(250*time.Millisecond)) || !s.nextProbe.Equal(t0.Add(500*time.Millisecond)) {
		t.Fatalf("first load %v, first probe %v", s.nextLoad.Sub(t0), s.nextProbe.Sub(t0))
	}
	at := t0.Add(250 * time.Millisecond)
	if !s.loadDue(at) || s.probeDue(at) {
		t.Fatal("the first load poll comes before the first probe")
	}
	if s.loaded(at, true) {
		t.Error("a load poll before /health ever answered must not count as a health check")
	}
	at = t0.Add(500 * time.Millisecond)
	if !s.probeDue(at) {
		t.Fatal("probe due")
	}
	s.probed(at, true)
	// Trusted now: the next probe is confirmFactor health intervals away and polls count.
	if want := at.Add(confirmFactor * time.Second); !s.nextProbe.Equal(want) {
		t.Errorf("next probe %v, want %v", s.nextProbe.Sub(t0), want.Sub(t0))
	}
	at = t0.Add(750 * time.Millisecond)
	if !s.loaded(at, true) {
		t.Error("a good load poll after a good probe counts as a health check")
	}

	// A failed load poll: the probe is due at once, and polls stop counting.
	at = t0.Add(1250 * time.Millisecond)
	if s.loaded(at, false) {
		t.Error("a failed poll is not a good health check")
	}
	if !s.probeDue(at) {
		t.Fatal("a failed poll of a trusted engine must bring the probe forward")
	}
	s.probed(at, true)
	if want := at.Add(time.Second); !s.nextProbe.Equal(want) {
		t.Errorf("with loads failing, probes every health interval: next %v", s.nextProbe.Sub(t0))
	}
	at = t0.Add(1750 * time.Millisecond)
	if s.loaded(at, true) {
		t.Error("the first good poll after a failed one does not count yet")
	}
	at = t0.Add(2250 * time.Millisecond)
	if !s.loaded(at, true) {
		t.Error("polls count again once the load and /health both answered")
	}

	// Draining: /health fails while loads succeed. Polls stop counting and /health is
	// probed every health interval until it answers again.
	s.probed(at, false)
	if want := at.Add(time.Second); !s.nextProbe.Equal(want) {
		t.Errorf("after a failed probe: next %v, want every health interval", s.nextProbe.Sub(t0))
	}
	for i := range 4 {
		if s.loaded(at.Add(time.Duration(i)*500*time.Millisecond), true) {
			t.Fatal("a load poll of an engine failing /health must not count as a health check")
		}
	}
}

// TestScheduleWithoutLoad: an engine whose load is not polled is probed every health
// interval, and load is never due.
func TestScheduleWithoutLoad(t *testing.T) {
	s := newSchedule(0, time.Second, half)
	s.start(t0)
	s.probed(t0, true)
	if want := t0.Add(time.Second); !s.nextProbe.Equal(want) || !s.wake().Equal(want) {
		t.Errorf("next probe %v, wake %v", s.nextProbe.Sub(t0), s.wake().Sub(t0))
	}
	if s.loadDue(t0.Add(time.Hour)) {
		t.Error("load is never due without a load source")
	}
}

// TestJitterSpreadsPolls: a fleet started at once has its first polls spread over the
// interval, and each later wait stays within the jitter of its interval.
func TestJitterSpreadsPolls(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const engines, every = 1000, 500 * time.Millisecond
	var buckets [10]int
	for range engines {
		s := newSchedule(every, time.Second, rng.Float64)
		s.start(t0)
		first := s.nextLoad.Sub(t0)
		if first < 0 || first >= every {
			t.Fatalf("first poll at %v, want within [0, %v)", first, every)
		}
		buckets[first*10/every]++
		s.loaded(t0.Add(first), true)
		if d := s.nextLoad.Sub(t0.Add(first)); d < every*9/10 || d > every*11/10 {
			t.Fatalf("next wait %v, want %v ± 10%%", d, every)
		}
	}
	// Each tenth of the interval gets about a tenth of the first polls, not a burst.
	for i, n := range buckets {
		if n < engines/20 || n > engines/5 {
			t.Errorf("tenth %d of the interval has %d of %d first polls: %v", i, n, engines, buckets)
		}
	}
}

// TestWakeSlots: wake times round up to the end of their slot, so loops due in one
// slot wake together, and a time on a slot boundary stays; the slot is a tenth of the
// shorter interval, between 1 ms and maxWakeSlot.
func TestWakeSlots(t *testing.T) {
	const slot = 50 * time.Millisecond
	for _, c := range []struct{ in, want time.Duration }{
		{0, 0}, {time.Nanosecond, slot}, {slot - 1, slot}, {slot, slot}, {slot + 1, 2 * slot},
	} {
		if got := alignUp(t0.Add(c.in), slot); !got.Equal(t0.Add(c.want)) {
			t.Errorf("alignUp(t0+%v) = t0+%v, want t0+%v", c.in, got.Sub(t0), c.want)
		}
	}
	for _, c := range []struct{ load, health, want time.Duration }{
		{500 * time.Millisecond, time.Second, maxWakeSlot},
		{100 * time.Millisecond, time.Second, 10 * time.Millisecond},
		{0, 200 * time.Millisecond, 20 * time.Millisecond},
		{5 * time.Millisecond, 2 * time.Millisecond, time.Millisecond},
	} {
		if got := wakeSlot(c.load, c.health); got != c.want {
			t.Errorf("wakeSlot(%v, %v) = %v, want %v", c.load, c.health, got, c.want)
		}
	}
}
