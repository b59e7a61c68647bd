package h1

import "time"

// waitDelay is how long after a request's body its pending read may start (see
// conn.wait). A request answered sooner (health, tokenize, a refusal, a short chat from a
// fast engine) never starts one and costs no goroutine and no thread woken for it; one
// that takes longer (a generation) notices its client leaving from then on, at most
// twice waitDelay late.
const waitDelay = 2 * time.Millisecond

// The states of a connection's pending read (conn.pending).
const (
	waitNone    int32 = iota
	waitArmed         // the body was read: the tick may start the read
	waitStarted       // the tick started it: its result comes on conn.waited
)

// start is the origin of clock.
var start = time.Now()

// clock is the monotonic time since start, in nanoseconds.
func clock() int64 { return int64(time.Since(start)) }

// armWait lists c for the wait tick, which starts c's pending read once it has been
// armed for waitDelay.
//
// One tick per server, not a timer per request: a timer set at every request's body and
// stopped at its end was, at one client, the earliest timer each time it was set, and
// the runtime woke an idle thread for it (runtime.wakeNetPoller): about a tenth of the
// router's CPU per request (docs/benchmarks.md, "Per-request CPU with Qwen3", session
// 7). The tick fires every waitDelay while connections are listed, whatever their
// number, and stops a period after the last one leaves.
func (s *Server) armWait(c *conn) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if !c.listed {
		c.listed = true
		s.waiters = append(s.waiters, c)
	}
	if s.ticking {
		return
	}
	s.ticking = true
	if s.waitTick == nil {
		s.waitTick = time.AfterFunc(waitDelay, s.tick)
	} else {
		s.waitTick.Reset(waitDelay)
	}
}

// tick starts the pending reads armed for waitDelay or longer, drops the connections
// whose request ended, and fires again while any were listed.
func (s *Server) tick() {
	now := clock()
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	listed := len(s.waiters)
	kept := s.waiters[:0]
	for _, c := range s.waiters {
		switch {
		case c.pending.Load() != waitArmed:
			c.listed = false
		case now-c.waitFrom.Load() >= int64(waitDelay) && c.pending.CompareAndSwap(waitArmed, waitStarted):
			c.listed = false
			go c.wait()
		default:
			kept = append(kept, c)
		}
	}
	clear(s.waiters[len(kept):])
	s.waiters = kept
	if listed == 0 {
		s.ticking = false
		return
	}
	s.waitTick.Reset(waitDelay)
}
