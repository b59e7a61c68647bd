package dispatch

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

func TestClassify(t *testing.T) {
	w := engine.New(plan.Engine{ID: "E1"})
	bg := context.Background()
	refused := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	timedOut := &net.OpError{Op: "dial", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Err: errors.New("connection reset")}
	for _, tc := range []struct {
		err       error
		kind      Kind
		retriable bool
	}{
		{refused, Unreachable, true},
		{timedOut, Timeout, true},
		{reset, Transport, false},
	} {
		de := classify(bg, bg, tc.err, w, plan.RolePlain)
		if de.Kind != tc.kind || de.Retriable() != tc.retriable {
			t.Errorf("%v: kind %v retriable %v", tc.err, de.Kind, de.Retriable())
		}
	}
	gone, cancel := context.WithCancel(bg)
	cancel()
	if de := classify(gone, gone, reset, w, plan.RolePlain); de.Kind != ClientGone {
		t.Errorf("a cancelled client is %v", de.Kind)
	}
	timed, stop := context.WithCancelCause(bg)
	stop(&Error{Kind: Timeout, Phase: PhaseTotal})
	if de := classify(timed, bg, reset, w, plan.RolePlain); de.Kind != Timeout || de.Phase != PhaseTotal {
		t.Errorf("a deadline cause is %v %s", de.Kind, de.Phase)
	}
	if (&Error{Kind: Unreachable, sent: true}).Retriable() {
		t.Error("a PD half that failed to connect after the other was sent is retriable")
	}
}
