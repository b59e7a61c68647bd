package token

import (
	"context"
	"errors"
	"testing"
)

// TestMeterBudget: the budget counts every text charged to one meter, the text that
// passes it fails with a TooLargeError naming the limit and the total, and a nil meter
// bounds nothing.
func TestMeterBudget(t *testing.T) {
	m := NewMeter(context.Background(), 100)
	for _, n := range []int{60, 40} {
		if err := m.Charge(n); err != nil {
			t.Fatalf("Charge(%d) within a budget of 100: %v", n, err)
		}
	}
	err := m.Charge(1)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 100 || tl.Size != 101 || !Stopped(err) {
		t.Fatalf("Charge past the budget = %v, want a TooLargeError of 101 bytes over 100", err)
	}
	if err := NewMeter(context.Background(), 0).Charge(1 << 40); err != nil {
		t.Errorf("no byte budget: Charge = %v", err)
	}
	var none *Meter
	if none.Charge(1<<40) != nil || none.Work(1<<40) != nil || none.Err() != nil || none.Done() != 0 {
		t.Error("a nil meter bounds something")
	}
}

// TestMeterLooksAtTheContextEveryCheckEvery: Work looks at the context once per
// CheckEvery bytes, not on every call, and returns its error once it has ended; Charge
// looks at once.
func TestMeterLooksAtTheContextEveryCheckEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := NewMeter(ctx, 0)
	if err := m.Work(CheckEvery); err != nil {
		t.Fatal(err)
	}
	cancel()
	var err error
	for err == nil && m.Done() < 10*CheckEvery {
		err = m.Work(1024)
	}
	if !errors.Is(err, context.Canceled) || m.Done() != 2*CheckEvery {
		t.Fatalf("Work stopped with %v after %d bytes, want Canceled at the next look, after %d bytes", err, m.Done(), 2*CheckEvery)
	}
	if err := NewMeter(ctx, 0).Charge(1); !errors.Is(err, context.Canceled) || !Stopped(err) {
		t.Errorf("Charge under an ended context = %v, want Canceled", err)
	}
}
