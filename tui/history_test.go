package tui

import (
	"testing"
	"time"
)

func TestSparkline(t *testing.T) {
	end := t0.Add(time.Minute)
	at := func(ago time.Duration, v float64) sample { return sample{at: end.Add(-ago), value: v, known: true} }
	tests := []struct {
		name  string
		h     series
		width int
		scale float64
		want  string
	}{
		{"empty", nil, 4, 10, "    "},
		{"no width", series{at(0, 5)}, 0, 10, ""},
		{"newest in the last cell", series{at(0, 10)}, 4, 10, "   █"},
		{"oldest in the first cell", series{at(59*time.Second, 0)}, 4, 10, "▁   "},
		{"older than the window is gone", series{at(time.Minute, 10)}, 4, 10, "    "},
		{"a cell shows its highest sample", series{at(29*time.Second, 2), at(16*time.Second, 8), at(time.Second, 4)}, 4, 8, "  █▅"},
		{"capacity scales, and caps", series{at(45*time.Second, 5), at(0, 50)}, 4, 10, "▅  █"},
		{"no capacity: scaled to the peak", series{at(45*time.Second, 1), at(0, 4)}, 4, 0, "▃  █"},
		{"unknown samples are gaps, not zero", series{at(45*time.Second, 4), {at: end, known: false}}, 4, 4, "█   "},
		{"from the future is ignored", series{at(-time.Second, 4)}, 4, 4, "    "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.sparkline(end, tt.width, tt.scale); got != tt.want {
				t.Errorf("sparkline = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSeriesKeepsOneWindow(t *testing.T) {
	var h series
	for i := range 90 {
		h = h.add(sample{at: t0.Add(time.Duration(i) * time.Second), known: true})
	}
	if len(h) != 60 || !h[0].at.Equal(t0.Add(30*time.Second)) {
		t.Errorf("kept %d samples from %s, want 60 from %s", len(h), h[0].at, t0.Add(30*time.Second))
	}
}

func TestRateOf(t *testing.T) {
	tests := []struct {
		name      string
		cur, prev float64
		dt        time.Duration
		hasPrev   bool
		want      rate
	}{
		{"first poll", 10, 0, time.Second, false, rate{}},
		{"steady", 30, 10, 2 * time.Second, true, rate{perS: 10, ok: true}},
		{"idle", 10, 10, time.Second, true, rate{perS: 0, ok: true}},
		{"counter reset", 3, 10, time.Second, true, rate{}},
		{"same snapshot time", 30, 10, 0, true, rate{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rateOf(tt.cur, tt.prev, tt.dt, tt.hasPrev); got != tt.want {
				t.Errorf("rateOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}
