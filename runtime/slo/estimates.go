package slo

import (
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// Quantiles the estimates stand for: a bucket's TTFT is its 95th percentile and its
// throughput its 5th, so a bucket meets a target for nearly every request it serves. The
// throughput's 5th percentile is the inverse of the inter-token time's 95th.
const estimateQuantile = 0.95

// Estimate sources, as traces and /admin/state show them.
const (
	SourceNone       = "none"
	SourceConfigured = "configured"
	SourceLearned    = "learned"
)

// Estimate is a bucket's current estimate of one latency.
type Estimate struct {
	// Value is the estimate (ms for TTFT, tokens per second for TPS); meaningful only
	// when Source is not SourceNone.
	Value  float64 `json:"value"`
	Source string  `json:"source"`
	// Weight is the decayed number of samples a learned estimate rests on, also when
	// too few to be used.
	Weight float64 `json:"weight,omitempty"`
}

// Known reports whether there is an estimate.
func (e Estimate) Known() bool { return e.Source != SourceNone }

// Estimates are one bucket's TTFT and TPS estimates: configured at capacity, and learned
// from observations when the bucket learns. A nil *Estimates has no estimate at all.
type Estimates struct {
	ttftMS, tps float64 // configured; 0 when not
	// ttft and itl hold observed time to first token and inter-token time in ms; nil
	// when the bucket does not learn.
	ttft, itl *Window
}

// NewEstimates builds a bucket's estimates from its plan; nil when the plan has none.
// clock is the time source of the learned ones; nil is time.Now.
func NewEstimates(p *plan.Estimates, clock func() time.Time) *Estimates {
	if p == nil {
		return nil
	}
	e := &Estimates{}
	if p.TTFTMS != nil {
		e.ttftMS = *p.TTFTMS
	}
	if p.TPS != nil {
		e.tps = *p.TPS
	}
	if l := p.Learn; l != nil {
		half := time.Duration(l.HalfLifeSecs) * time.Second
		e.ttft = NewWindow(l.Samples, half, float64(l.MinSamples), clock)
		e.itl = NewWindow(l.Samples, half, float64(l.MinSamples), clock)
	}
	return e
}

// TTFT returns the time-to-first-token estimate in ms: the learned one when there are
// enough recent samples, else the configured one.
func (e *Estimates) TTFT() Estimate {
	if e == nil {
		return Estimate{Source: SourceNone}
	}
	return pick(e.ttft, e.ttftMS, func(ms float64) float64 { return ms })
}

// TPS returns the decode throughput estimate in tokens per second: learned from the
// inter-token time when there are enough recent samples, else the configured one.
func (e *Estimates) TPS() Estimate {
	if e == nil {
		return Estimate{Source: SourceNone}
	}
	return pick(e.itl, e.tps, itlToTPS)
}

func itlToTPS(ms float64) float64 {
	if ms <= 0 {
		return 0 // no gap measured: no usable throughput
	}
	return 1000 / ms
}

// pick is the learned estimate of w converted by conv when known, else configured.
func pick(w *Window, configured float64, conv func(float64) float64) Estimate {
	var weight float64
	if w != nil {
		v, wt, known := w.Quantile(estimateQuantile)
		if known && conv(v) > 0 {
			return Estimate{Value: conv(v), Source: SourceLearned, Weight: wt}
		}
		weight = wt
	}
	if configured > 0 {
		return Estimate{Value: configured, Source: SourceConfigured, Weight: weight}
	}
	return Estimate{Source: SourceNone, Weight: weight}
}

// Learns reports whether the bucket learns from observations; serving feeds only those.
func (e *Estimates) Learns() bool { return e != nil && e.ttft != nil }

// ObserveTTFT records a request's time to first token at the bucket.
func (e *Estimates) ObserveTTFT(d time.Duration) {
	if e.Learns() {
		e.ttft.Add(ms(d))
	}
}

// ObserveInterToken records a gap between two streamed tokens (or the mean gap of a
// response) at the bucket.
func (e *Estimates) ObserveInterToken(d time.Duration) {
	if e.Learns() {
		e.itl.Add(ms(d))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
