package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// A stream that keeps delivering within the idle time lives past many idle periods; one
// that goes quiet is cut with the stream-idle phase as the cause.
func TestStreamIdleDeadlineFollowsReads(t *testing.T) {
	s := &Server{timeouts: timeouts{firstByte: time.Minute, streamIdle: 300 * time.Millisecond, total: time.Minute}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	d := s.startDeadlines(ctx, cancel, engine.New(plan.Engine{ID: "E1"}), plan.RolePlain, nil)
	defer d.stop()
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
	case <-time.After(10 * time.Second):
		t.Fatal("a quiet stream was never cut")
	}
	var de *dispatchError
	if !errors.As(context.Cause(ctx), &de) || de.kind != failTimeout || de.phase != phaseStreamIdle || de.after != 300*time.Millisecond {
		t.Fatalf("cause = %v, want a stream_idle timeout after 300ms", context.Cause(ctx))
	}
}

// The first-byte deadline names its own phase, and stopping the deadlines leaves no
// timer to fire.
func TestFirstByteDeadlineAndStop(t *testing.T) {
	s := &Server{timeouts: timeouts{firstByte: 50 * time.Millisecond, streamIdle: time.Minute, total: time.Minute}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	d := s.startDeadlines(ctx, cancel, engine.New(plan.Engine{ID: "E1"}), plan.RolePlain, nil)
	<-ctx.Done()
	d.stop()
	var de *dispatchError
	if !errors.As(context.Cause(ctx), &de) || de.phase != phaseFirstByte {
		t.Fatalf("cause = %v, want a first_byte timeout", context.Cause(ctx))
	}

	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	s.timeouts.streamIdle = 20 * time.Millisecond
	d = s.startDeadlines(ctx2, cancel2, engine.New(plan.Engine{ID: "E1"}), plan.RolePlain, nil)
	d.gotHeaders()
	d.headers()
	d.stop()
	time.Sleep(100 * time.Millisecond)
	if ctx2.Err() != nil {
		t.Fatalf("stopped deadlines cancelled the dispatch: %v", context.Cause(ctx2))
	}
}
