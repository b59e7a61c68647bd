package engine

import (
	"testing"
	"time"
)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b := NewBreaker(3, 10*time.Second, clk.Now)
	for range 2 {
		b.Failure()
	}
	b.Success() // a success resets the count
	for range 2 {
		b.Failure()
	}
	if b.State() != BreakerClosed || !b.Allow() {
		t.Fatalf("state %v after 2 consecutive failures, want closed", b.State())
	}
	b.Failure()
	if b.State() != BreakerOpen || b.Allow() || b.Acquire() || b.Trips() != 1 {
		t.Fatalf("state %v after 3 consecutive failures, want open and refusing", b.State())
	}
	clk.now = clk.now.Add(10 * time.Second)
	if b.State() != BreakerHalfOpen || !b.Allow() {
		t.Fatalf("state %v after the open period, want half-open and selectable", b.State())
	}
	if !b.Acquire() {
		t.Fatal("the probe was refused")
	}
	if b.Allow() || b.Acquire() {
		t.Fatal("a second request got through while the probe runs")
	}
	b.Failure() // the probe failed: open again for a full period
	if b.State() != BreakerOpen || b.Trips() != 2 {
		t.Fatalf("state %v after a failed probe, want open", b.State())
	}
	clk.now = clk.now.Add(10 * time.Second)
	if !b.Acquire() {
		t.Fatal("no probe after the second open period")
	}
	b.Abandon() // the client left: the slot is free again
	if !b.Acquire() {
		t.Fatal("an abandoned probe kept its slot")
	}
	b.Success()
	if b.State() != BreakerClosed || !b.Allow() {
		t.Fatalf("state %v after a good probe, want closed", b.State())
	}
}

func TestWorkerAvailableFollowsBreaker(t *testing.T) {
	w := worker("A", "plain")
	if !w.Available() {
		t.Fatal("a worker without a breaker is unavailable")
	}
	b := NewBreaker(1, time.Hour, nil)
	w.SetBreaker(b)
	b.Failure()
	if w.Available() || !w.Healthy() {
		t.Fatal("an open breaker must make the worker unavailable but not unhealthy")
	}
	w.SetHealthy(false)
	b.Success()
	if w.Available() {
		t.Fatal("an unhealthy worker is available")
	}
}

// TestBreakerConfigureKeepsState: new settings apply to the failures already counted and
// to the next opening, and an open breaker stays open for the period it was opened with.
func TestBreakerConfigureKeepsState(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b := NewBreaker(3, time.Second, clk.Now)
	b.Failure()
	b.Configure(2, 5*time.Second)
	if b.State() != BreakerClosed {
		t.Fatal("configuring opened the breaker")
	}
	b.Failure() // the second consecutive failure meets the new threshold
	if b.State() != BreakerOpen {
		t.Fatalf("state %v after 2 failures with threshold 2", b.State())
	}
	clk.now = clk.now.Add(4 * time.Second)
	if b.State() != BreakerOpen {
		t.Fatal("open for less than the new 5s period")
	}
	b.Configure(2, time.Minute)
	clk.now = clk.now.Add(2 * time.Second)
	if b.State() != BreakerHalfOpen {
		t.Fatalf("state %v after the 5s it was opened for, want half_open", b.State())
	}
}
