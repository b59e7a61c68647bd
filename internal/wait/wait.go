// Package wait is the tests' one way to wait for something they cannot be told about: a
// background goroutine's effect, a socket's peer, a process's state. It polls, with a
// deadline generous enough for a busy 2-core CI machine under -race, so a slow run waits
// longer instead of failing; a condition that never holds still fails, after Timeout.
//
// Tests whose waiting is on timers alone use testing/synctest instead, which needs no
// polling at all.
package wait

import (
	"testing"
	"time"
)

// Timeout is how long For and Until poll before giving up. It bounds only a failing test:
// a passing one returns as soon as its condition holds.
const Timeout = 30 * time.Second

// interval is the pause between two polls: short enough not to slow a test, long enough
// not to starve the goroutines the condition waits for.
const interval = 5 * time.Millisecond

// For polls cond until it holds, and fails t with "timed out waiting for what" when it
// has not held within Timeout.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Until(cond) {
		t.Fatalf("timed out after %v waiting for %s", Timeout, what)
	}
}

// Until polls cond until it holds and reports true, or reports false after Timeout; for a
// test whose failure message needs more than a description, such as a process's log.
func Until(cond func() bool) bool {
	for deadline := time.Now().Add(Timeout); !cond(); time.Sleep(interval) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
