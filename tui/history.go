package tui

import (
	"math"
	"strings"
	"time"
)

// window is how much load history the sparkline shows.
const window = time.Minute

// rate is a counter's per-second rate between two snapshots; ok is false when it cannot be
// known: the first snapshot, a counter that went down (the router restarted), or
// snapshots without a time interval between them.
type rate struct {
	perS float64
	ok   bool
}

// rateOf is the rate of a counter that went from prev to cur in dt; hasPrev is false on
// the first poll of the counter.
func rateOf(cur, prev float64, dt time.Duration, hasPrev bool) rate {
	if !hasPrev || dt <= 0 || cur < prev {
		return rate{}
	}
	return rate{perS: (cur - prev) / dt.Seconds(), ok: true}
}

// sample is one engine's load at one poll; known is false when the router had no usable
// report, which the sparkline draws as a gap rather than as zero.
type sample struct {
	at    time.Time
	value float64
	known bool
}

// series is an engine's load samples over the last window, oldest first.
type series []sample

// add appends s and drops the samples that fell out of the window ending at s.at.
func (h series) add(s sample) series {
	h = append(h, s)
	cut := 0
	for cut < len(h) && s.at.Sub(h[cut].at) >= window {
		cut++
	}
	return h[cut:]
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws the window ending at end in width cells, each cell the highest load in
// its slice of time, scaled to scale (the engine's capacity) or, when that is unknown, to
// the highest load in the window. A cell without a known sample is a space.
func (h series) sparkline(end time.Time, width int, scale float64) string {
	if width <= 0 {
		return ""
	}
	cells := make([]float64, width)
	seen := make([]bool, width)
	peak := 0.0
	for _, s := range h {
		age := end.Sub(s.at)
		if !s.known || age < 0 || age >= window {
			continue
		}
		i := width - 1 - int(int64(age)*int64(width)/int64(window))
		cells[i], seen[i] = max(cells[i], s.value), true
		peak = max(peak, s.value)
	}
	if scale <= 0 {
		scale = max(peak, 1)
	}
	var b strings.Builder
	for i, v := range cells {
		if !seen[i] {
			b.WriteByte(' ')
			continue
		}
		level := int(math.Round(max(0, min(v/scale, 1)) * float64(len(sparks)-1)))
		b.WriteRune(sparks[level])
	}
	return b.String()
}

// snapshot is a polled State with what the monitor derives from it and the poll before:
// counter rates and each engine's load history.
type snapshot struct {
	*State
	at      time.Time // the router's time, or the poll's when the router sends none
	polled  time.Time // the model's clock at the poll
	engines map[string]engineRates
	buckets map[string]bucketRates
	history map[string]series
}

type engineRates struct{ picks, rejections rate }

type bucketRates struct{ requests, fallthroughs, errors rate }

// next derives the snapshot for st, polled at polled, from prev (nil for the first poll).
// It builds new maps rather than updating prev's, because models are values and an older
// copy must keep rendering what it saw.
func (prev *snapshot) next(st *State, polled time.Time) *snapshot {
	s := &snapshot{
		State: st, at: st.Time, polled: polled,
		engines: map[string]engineRates{}, buckets: map[string]bucketRates{}, history: map[string]series{},
	}
	if s.at.IsZero() {
		s.at = polled
	}
	var dt time.Duration
	before := map[string]*Engine{}
	beforeBuckets := map[string]*Bucket{}
	if prev != nil {
		dt = s.at.Sub(prev.at)
		for i := range prev.Engines {
			before[prev.Engines[i].ID] = &prev.Engines[i]
		}
		for i := range prev.Buckets {
			beforeBuckets[prev.Buckets[i].key()] = &prev.Buckets[i]
		}
	}
	for _, e := range st.Engines {
		p, ok := before[e.ID]
		if !ok {
			p = &Engine{}
		}
		s.engines[e.ID] = engineRates{
			picks:      rateOf(e.Picks, p.Picks, dt, ok),
			rejections: rateOf(e.Rejections, p.Rejections, dt, ok),
		}
		var h series
		if prev != nil {
			h = prev.history[e.ID]
		}
		smp := sample{at: s.at, known: e.Load != nil}
		if e.Load != nil {
			smp.value = float64(e.Load.Running + e.Load.Waiting)
		}
		s.history[e.ID] = h.add(smp)
	}
	for _, b := range st.Buckets {
		p, ok := beforeBuckets[b.key()]
		if !ok {
			p = &Bucket{}
		}
		s.buckets[b.key()] = bucketRates{
			requests:     rateOf(b.Requests, p.Requests, dt, ok),
			fallthroughs: rateOf(b.Fallthroughs, p.Fallthroughs, dt, ok),
			errors:       rateOf(b.failed(), p.failed(), dt, ok),
		}
	}
	return s
}

func (b *Bucket) key() string { return b.Model + "\x00" + b.ID }

// failed is how many of the bucket's requests were answered with a status other than 2xx.
func (b *Bucket) failed() float64 {
	n := 0.0
	for status, count := range b.ByStatus {
		if !strings.HasPrefix(status, "2") {
			n += count
		}
	}
	return n
}
