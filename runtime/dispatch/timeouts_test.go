package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// started starts a dispatch's deadlines under timeouts to, on a context the test ends.
func started(t *testing.T, to Timeouts, role plan.Role, pf *prefillStatus) (context.Context, *deadlines) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	dp := &Dispatcher{timeouts: to}
	d := dp.startDeadlines(ctx, cancel, engine.New(plan.Engine{ID: "E1"}), role, pf)
	t.Cleanup(func() { d.stop(); cancel(nil) })
	return ctx, d
}

// A stream that keeps delivering within the idle time lives past many idle periods; one
// that goes quiet is cut with the stream-idle phase as the cause.
func TestStreamIdleDeadlineFollowsReads(t *testing.T) {
	ctx, d := started(t, Timeouts{FirstByte: time.Minute, StreamIdle: 300 * time.Millisecond, Total: time.Minute}, plan.RolePlain, nil)
	d.gotHeaders()
	d.headers()
	for range 20 { // a second and a half of reads, five idle periods
		time.Sleep(75 * time.Millisecond)
		d.progress()
		if ctx.Err() != nil {
			t.Fatalf("a stream with steady reads was cut: %v", context.Cause(ctx))
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(wait.Timeout):
		t.Fatal("a quiet stream was never cut")
	}
	var de *Error
	if !errors.As(context.Cause(ctx), &de) || de.Kind != Timeout || de.Phase != PhaseStreamIdle || de.After != 300*time.Millisecond {
		t.Fatalf("cause = %v, want a stream_idle timeout after 300ms", context.Cause(ctx))
	}
}

// The first-byte deadline names its own phase, and stopping the deadlines leaves no
// timer to fire.
func TestFirstByteDeadlineAndStop(t *testing.T) {
	ctx, d := started(t, Timeouts{FirstByte: 50 * time.Millisecond, StreamIdle: time.Minute, Total: time.Minute}, plan.RolePlain, nil)
	<-ctx.Done()
	d.stop()
	var de *Error
	if !errors.As(context.Cause(ctx), &de) || de.Phase != PhaseFirstByte {
		t.Fatalf("cause = %v, want a first_byte timeout", context.Cause(ctx))
	}

	ctx2, d := started(t, Timeouts{FirstByte: 50 * time.Millisecond, StreamIdle: 20 * time.Millisecond, Total: time.Minute}, plan.RolePlain, nil)
	d.gotHeaders()
	d.headers()
	d.stop()
	time.Sleep(100 * time.Millisecond)
	if ctx2.Err() != nil {
		t.Fatalf("stopped deadlines cancelled the dispatch: %v", context.Cause(ctx2))
	}
}

// phaseOf waits for ctx to be cancelled and returns the timeout phase of its cause.
func phaseOf(t *testing.T, ctx context.Context, within time.Duration) string {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(within):
		t.Fatalf("not cancelled within %v", within)
	}
	var de *Error
	if !errors.As(context.Cause(ctx), &de) || de.Kind != Timeout {
		t.Fatalf("cause = %v, want a timeout", context.Cause(ctx))
	}
	return de.Phase
}

// The one timer, re-armed for the total deadline while the headers were in (a PD decode
// half waiting for its prefill's status), is brought forward when the body may flow: the
// stream-idle deadline still holds.
func TestIdleDeadlineAfterAWaitBetweenHeadersAndBody(t *testing.T) {
	ctx, d := started(t, Timeouts{FirstByte: 50 * time.Millisecond, StreamIdle: 200 * time.Millisecond, Total: time.Minute}, plan.RolePlain, nil)
	d.gotHeaders()
	time.Sleep(300 * time.Millisecond) // the timer fired and re-armed for the total deadline
	if ctx.Err() != nil {
		t.Fatalf("cut while waiting after the headers: %v", context.Cause(ctx))
	}
	d.headers()
	if p := phaseOf(t, ctx, 5*time.Second); p != PhaseStreamIdle {
		t.Fatalf("phase %s, want %s", p, PhaseStreamIdle)
	}
}

// The total deadline cuts a stream that never goes quiet.
func TestTotalDeadlineCutsABusyStream(t *testing.T) {
	ctx, d := started(t, Timeouts{FirstByte: time.Minute, StreamIdle: time.Minute, Total: 150 * time.Millisecond}, plan.RolePlain, nil)
	d.gotHeaders()
	d.headers()
	go func() {
		for ctx.Err() == nil {
			d.progress()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if p := phaseOf(t, ctx, 5*time.Second); p != PhaseTotal {
		t.Fatalf("phase %s, want %s", p, PhaseTotal)
	}
}

// A PD decode half's first-byte deadline starts when its prefill's status is known.
func TestDecodeFirstByteDeadlineStartsAfterPrefill(t *testing.T) {
	pf := newPrefillStatus()
	ctx, _ := started(t, Timeouts{FirstByte: 100 * time.Millisecond, StreamIdle: time.Minute, Total: time.Minute}, plan.RoleDecode, pf)
	time.Sleep(300 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("the first-byte deadline ran while the prefill was pending: %v", context.Cause(ctx))
	}
	pf.set(nil)
	if p := phaseOf(t, ctx, 5*time.Second); p != PhaseFirstByte {
		t.Fatalf("phase %s, want %s", p, PhaseFirstByte)
	}
}
