package queue

import (
	"math"
	"time"
)

// bucket is a token bucket: it starts full with burst tokens and refills at rate per
// second up to burst. Unlike SGLang's router, whose bucket doubles as its concurrency
// limit (a request returns its token when it ends, sgl-router src/core/token_bucket.rs
// return_tokens), tokens are never returned: the concurrency limit is a count of its own,
// and the bucket limits the rate of arrivals alone.
type bucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(r Rate, now time.Time) *bucket {
	return &bucket{rate: r.PerSecond, burst: float64(r.Burst), tokens: float64(r.Burst), last: now}
}

// fill adds the tokens earned since the last call.
func (b *bucket) fill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// take takes a token when there is one.
func (b *bucket) take(now time.Time) bool {
	b.fill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// until is how long until a token is there: 0 when there is one, math.MaxInt64 when the
// bucket never refills (a rate of 0).
func (b *bucket) until(now time.Time) time.Duration {
	b.fill(now)
	switch {
	case b.tokens >= 1:
		return 0
	case b.rate <= 0:
		return math.MaxInt64
	}
	return time.Duration(math.Ceil((1 - b.tokens) / b.rate * float64(time.Second)))
}
