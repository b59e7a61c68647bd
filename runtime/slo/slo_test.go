package slo

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

func TestParseTargets(t *testing.T) {
	on := plan.SLOPreferences{TTFT: plan.SLOFirst, TPS: plan.SLOBestEffort}
	off := plan.SLOPreferences{TTFT: plan.SLODisabled, TPS: plan.SLODisabled}
	for _, tc := range []struct {
		name, ttft, tps string
		prefs           plan.SLOPreferences
		want            Targets
		badHeader       string
	}{
		{name: "both", ttft: "200", tps: " 12.5 ", prefs: on, want: Targets{TTFTMS: 200, TPS: 12.5}},
		{name: "absent", prefs: on},
		{name: "disabled headers are ignored, even malformed", ttft: "abc", tps: "-1", prefs: off},
		{name: "only the enabled one is read", ttft: "150", tps: "NaN", prefs: plan.SLOPreferences{TTFT: plan.SLOFirst, TPS: plan.SLODisabled}, want: Targets{TTFTMS: 150}},
		{name: "zero", ttft: "0", prefs: on, badHeader: TTFTHeader},
		{name: "negative", ttft: "-5", prefs: on, badHeader: TTFTHeader},
		{name: "not a number", ttft: "fast", prefs: on, badHeader: TTFTHeader},
		{name: "NaN", tps: "NaN", prefs: on, badHeader: TPSHeader},
		{name: "infinite", tps: "+Inf", prefs: on, badHeader: TPSHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTargets(tc.ttft, tc.tps, tc.prefs)
			var bad *InvalidTarget
			switch {
			case tc.badHeader != "":
				if !errors.As(err, &bad) || bad.Header != tc.badHeader {
					t.Fatalf("want InvalidTarget for %s, got %v", tc.badHeader, err)
				}
			case err != nil || got != tc.want:
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// clock is a settable test clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// The window's quantile is weighted by age: old samples count less, and a window whose
// samples all decayed below the minimum weight has no estimate.
func TestWindowDecay(t *testing.T) {
	c := newClock()
	w := NewWindow(100, time.Minute, 3, c.Now)
	if _, _, known := w.Quantile(0.95); known {
		t.Fatal("an empty window has no estimate")
	}
	for range 10 {
		w.Add(1000) // ten slow samples
	}
	c.now = c.now.Add(5 * time.Minute) // they now weigh 1/32 each
	for range 10 {
		w.Add(10) // ten fast ones, new
	}
	v, weight, known := w.Quantile(0.95)
	if !known || v != 10 || math.Abs(weight-(10+10.0/32)) > 1e-9 {
		t.Fatalf("quantile %v weight %v known %v; want 10 on weight 10.3125: the old slow samples weigh under 5%%", v, weight, known)
	}
	c.now = c.now.Add(3 * time.Minute) // fast samples weigh 1/8 each: 1.25 + 10/256
	if _, weight, known := w.Quantile(0.95); known || weight >= 3 {
		t.Fatalf("weight %v known %v; want below the minimum of 3, unknown", weight, known)
	}
}

// The window keeps at most its capacity, overwriting the oldest sample first, and drops
// values that are no observation.
func TestWindowBounded(t *testing.T) {
	c := newClock()
	w := NewWindow(4, time.Hour, 1, c.Now)
	for _, v := range []float64{500, 500, 1, 2, 3, 4, -1, math.NaN(), math.Inf(1)} {
		w.Add(v)
	}
	if len(w.samples) != 4 || cap(w.samples) != 4 {
		t.Fatalf("window holds %d samples (cap %d), want 4", len(w.samples), cap(w.samples))
	}
	if v, weight, _ := w.Quantile(0.99); v != 4 || weight != 4 {
		t.Fatalf("p99 %v on weight %v, want 4 on 4: the two 500s were overwritten", v, weight)
	}
	if v, _, _ := w.Quantile(0.5); v != 2 {
		t.Fatalf("median %v, want 2", v)
	}
}

// A memoized quantile is reused for 1/4096 of a half-life after a sample arrives, then
// recomputed; without new samples, for 1/16.
func TestWindowMemo(t *testing.T) {
	c := newClock()
	w := NewWindow(8, 4096*time.Second, 1, c.Now)
	w.Add(5)
	if v, _, _ := w.Quantile(0.95); v != 5 {
		t.Fatalf("p95 %v, want 5", v)
	}
	w.Add(50)
	if v, _, _ := w.Quantile(0.95); v != 5 {
		t.Fatalf("p95 at once after a new sample %v, want the memoized 5", v)
	}
	c.now = c.now.Add(time.Second)
	v, w1, _ := w.Quantile(0.95)
	if v != 50 {
		t.Fatalf("p95 a moment after a new sample %v, want 50", v)
	}
	c.now = c.now.Add(200 * time.Second)
	if _, weight, _ := w.Quantile(0.95); weight != w1 {
		t.Fatalf("weight %v within 1/16 half-life and no new sample, want the memoized %v", weight, w1)
	}
	c.now = c.now.Add(100 * time.Second)
	if _, weight, _ := w.Quantile(0.95); weight >= w1 {
		t.Fatalf("weight %v past 1/16 half-life, want it recomputed and decayed below %v", weight, w1)
	}
}

// Estimates prefer the learned value once known, fall back to the configured one, and turn
// the inter-token time's p95 into a throughput.
func TestEstimatesSources(t *testing.T) {
	c := newClock()
	ttft, tps := 300.0, 40.0
	e := NewEstimates(&plan.Estimates{TTFTMS: &ttft, TPS: &tps, Learn: &plan.Learn{Samples: 8, HalfLifeSecs: 60, MinSamples: 2}}, c.Now)
	if got := e.TTFT(); got.Source != SourceConfigured || got.Value != 300 {
		t.Fatalf("TTFT before samples: %+v", got)
	}
	e.ObserveTTFT(120 * time.Millisecond)
	c.now = c.now.Add(time.Second) // past the moment a new sample waits to count
	if got := e.TTFT(); got.Source != SourceConfigured || got.Weight > 1 || got.Weight < 0.98 {
		t.Fatalf("TTFT on one sample (minimum 2): %+v", got)
	}
	// Two samples a second apart weigh just under 2: decayed weight counts, so a third
	// is needed to reach the minimum of 2.
	e.ObserveTTFT(80 * time.Millisecond)
	c.now = c.now.Add(time.Second)
	if got := e.TTFT(); got.Source != SourceConfigured || got.Weight >= 2 {
		t.Fatalf("TTFT on two aged samples: %+v", got)
	}
	e.ObserveTTFT(100 * time.Millisecond)
	for _, d := range []time.Duration{50, 20, 30} {
		e.ObserveInterToken(d * time.Millisecond)
	}
	c.now = c.now.Add(time.Second)
	if got := e.TTFT(); got.Source != SourceLearned || got.Value != 120 {
		t.Fatalf("learned TTFT: %+v, want p95 120", got)
	}
	if got := e.TPS(); got.Source != SourceLearned || got.Value != 20 {
		t.Fatalf("learned TPS: %+v, want 1000/50 = 20 (the slow gap's throughput)", got)
	}

	var none *Estimates
	if none.TTFT().Known() || none.TPS().Known() || none.Learns() {
		t.Fatal("nil estimates know nothing")
	}
	none.ObserveTTFT(time.Second) // no bucket estimates: a no-op, not a panic
	static := NewEstimates(&plan.Estimates{TPS: &tps}, c.Now)
	static.ObserveTTFT(time.Millisecond)
	if static.Learns() || static.TTFT().Known() || static.TPS().Value != 40 {
		t.Fatalf("configured-only estimates: ttft %+v tps %+v", static.TTFT(), static.TPS())
	}
}

// A stream's first event is its TTFT and the mean gap between events its inter-token
// time; [DONE] is no token, and a bucket that does not learn measures nothing.
func TestStream(t *testing.T) {
	c := newClock()
	start := c.now
	e := NewEstimates(&plan.Estimates{Learn: &plan.Learn{Samples: 4, HalfLifeSecs: 60, MinSamples: 1}}, c.Now)
	s := NewStream(e, start, c.Now)
	c.now = c.now.Add(200 * time.Millisecond)
	s.Write([]byte("data: {\"a\":1}\n\n"))
	c.now = c.now.Add(40 * time.Millisecond)
	s.Write([]byte("data: {\"b\":2}\n\ndata: {\"c\":3}\n\n"))
	c.now = c.now.Add(time.Second)
	s.Write([]byte("data: [DONE]\n\n")) // no token: the last gap does not count
	s.Done()
	if got := e.TTFT(); got.Source != SourceLearned || got.Value != 200 {
		t.Errorf("TTFT %+v, want 200 ms learned", got)
	}
	if got := e.TPS(); got.Source != SourceLearned || got.Value != 50 {
		t.Errorf("TPS %+v, want 1000/20 ms (40 ms over two gaps)", got)
	}

	static := NewEstimates(&plan.Estimates{TTFTMS: new(200.0)}, c.Now)
	if NewStream(static, start, c.Now) != nil {
		t.Error("a bucket that does not learn gets no stream measurement")
	}
	var none *Stream
	none.Write([]byte("data: x"))
	none.Done()
}
