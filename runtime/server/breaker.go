package server

import (
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

func newBreaker(b plan.Breaker, clock func() time.Time) *engine.Breaker {
	threshold, open := breakerSettings(b)
	return engine.NewBreaker(threshold, open, clock)
}

// breakerSettings are b's threshold and open period, with the defaults for unset ones.
func breakerSettings(b plan.Breaker) (threshold int, open time.Duration) {
	threshold, open = b.FailureThreshold, time.Duration(b.OpenMS)*time.Millisecond
	if threshold <= 0 {
		threshold = 5
	}
	if open <= 0 {
		open = 10 * time.Second
	}
	return threshold, open
}
