package logline

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The standard library's handlers are the reference: every record is written by both
// and the lines must be equal, byte for byte.

var tricky = []string{
	"", "plain", "with space", "a=b", `quote"d`, `back\slash`, "tab\there", "new\nline",
	"cr\rx", "\x00\x01\x1f\x7f", "é ü 漢字", "\u2028\u2029", "bad\xffutf8", "\u00a0nbsp",
	"emoji 🙂", "<html>&amp;", "E1", "engines.plain", "\u200b", "{}[]:,",
}

var floats = []float64{0, math.Copysign(0, -1), 1, -1.5, 0.001, 1e-6, 9.99e-7, 1e-7, 1.234e-9,
	1e20, 1e21, 1.5e300, 123456.789, 0.1 + 0.2, 5e-324, 1.325, 0.5, 999999.999, 1e6, 1000.1}

func zones() []*time.Location {
	return []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+1800), time.FixedZone("W", -7*3600)}
}

func randomAttr(rng *rand.Rand, top bool) slog.Attr {
	key := tricky[1+rng.IntN(len(tricky)-1)]
	switch n := rng.IntN(7); {
	case n == 0:
		return slog.String(key, tricky[rng.IntN(len(tricky))])
	case n == 1:
		return slog.Int64(key, rng.Int64()-math.MaxInt64/2)
	case n == 2:
		return slog.Uint64(key, rng.Uint64())
	case n == 3:
		return slog.Bool(key, rng.IntN(2) == 0)
	case n == 4:
		return slog.Float64(key, floats[rng.IntN(len(floats))]*float64(1-2*rng.IntN(2)))
	case n == 5 && top:
		members := make([]slog.Attr, rng.IntN(3))
		for i := range members {
			members[i] = randomAttr(rng, false)
		}
		return slog.Attr{Key: key, Value: slog.GroupValue(members...)}
	default:
		return slog.Int(key, rng.IntN(1000))
	}
}

func reference(json bool, level slog.Level) (*bytes.Buffer, slog.Handler) {
	var b bytes.Buffer
	opts := &slog.HandlerOptions{Level: level}
	if json {
		return &b, slog.NewJSONHandler(&b, opts)
	}
	return &b, slog.NewTextHandler(&b, opts)
}

func sameLine(t *testing.T, json bool, r slog.Record) {
	t.Helper()
	want, std := reference(json, slog.LevelDebug)
	var got bytes.Buffer
	h := New(&got, json, &slog.HandlerOptions{Level: slog.LevelDebug})
	if err := std.Handle(context.Background(), r.Clone()); err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(context.Background(), r.Clone()); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("json=%v\n got %q\nwant %q", json, got.String(), want.String())
	}
}

func TestMatchesStandardHandlers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	levels := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2}
	for i := range 3000 {
		when := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(zones()[i%3])
		r := slog.NewRecord(when, levels[rng.IntN(len(levels))], tricky[rng.IntN(len(tricky))], 0)
		for range rng.IntN(9) {
			r.AddAttrs(randomAttr(rng, true))
		}
		sameLine(t, i%2 == 0, r)
	}
}

// The router's request line, as server.logRequest builds it.
func TestRequestLine(t *testing.T) {
	r := slog.NewRecord(time.Date(2026, 12, 3, 7, 14, 49, 120_000_000, time.UTC), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("model", "m"), slog.String("bucket", "all"),
		slog.Attr{Key: "engines", Value: slog.GroupValue(slog.String("decode", "D1"), slog.String("prefill", "P1"))},
		slog.Int("status", 200), slog.Float64("duration_ms", 1.5), slog.Int64("input_tokens", 7),
		slog.String("error", "admission_rejected: full"))
	for _, json := range []bool{false, true} {
		sameLine(t, json, r)
	}
	var got bytes.Buffer
	_ = New(&got, false, nil).Handle(context.Background(), r)
	want := `time=2026-12-03T07:14:49.120Z level=INFO msg=request model=m bucket=all engines.decode=D1 engines.prefill=P1 status=200 duration_ms=1.5 input_tokens=7 error="admission_rejected: full"` + "\n"
	if got.String() != want {
		t.Fatalf("got  %q\nwant %q", got.String(), want)
	}
}

// Durations in whole microseconds, as milliseconds (the request line's duration_ms),
// are written as slog writes them: every one up to 100 ms, and random ones up to and
// past a million milliseconds, where slog's text turns to exponents.
func TestDurationsMatchStandardHandlers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	micros := []int64{999_999_999, 1_000_000_000, 1_000_000_001, 123_456_789_012}
	for m := int64(1); m <= 100_000; m++ {
		micros = append(micros, m)
	}
	for range 20_000 {
		micros = append(micros, rng.Int64N(2_000_000_000))
	}
	for _, json := range []bool{false, true} {
		want, std := reference(json, slog.LevelInfo)
		var got bytes.Buffer
		h := New(&got, json, nil)
		for _, m := range micros {
			r := slog.NewRecord(time.Unix(1_796_400_000, 0).UTC(), slog.LevelInfo, "request", 0) // not zero: the fast path's
			r.AddAttrs(slog.Float64("duration_ms", float64(m)/1000))
			_ = std.Handle(context.Background(), r)
			_ = h.Handle(context.Background(), r)
		}
		if got.String() != want.String() {
			g, w := strings.Split(got.String(), "\n"), strings.Split(want.String(), "\n")
			for i := range min(len(g), len(w)) {
				if g[i] != w[i] {
					t.Fatalf("json=%v, %d µs: got %q, want %q", json, micros[i], g[i], w[i])
				}
			}
			t.Fatalf("json=%v: %d lines, want %d", json, len(g), len(w))
		}
	}
}

// One handler's records, milliseconds apart within and across seconds, in three
// locations in turn (a second's text is kept for the records that follow), are dated
// as slog dates them.
func TestTimesMatchStandardHandlers(t *testing.T) {
	want, std := reference(false, slog.LevelInfo)
	var got bytes.Buffer
	h := New(&got, false, nil)
	start := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	for i := range 3000 {
		when := start.Add(time.Duration(i) * 1300 * time.Microsecond).In(zones()[i/7%3])
		r := slog.NewRecord(when, slog.LevelInfo, "request", 0)
		_ = std.Handle(context.Background(), r)
		_ = h.Handle(context.Background(), r)
	}
	if g, w := strings.Split(got.String(), "\n"), strings.Split(want.String(), "\n"); !slices.Equal(g, w) {
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Fatalf("record %d: got %q, want %q", i, g[i], w[i])
			}
		}
		t.Fatalf("%d lines, want %d", len(g), len(w))
	}
}

// Records the fast path does not format go to the standard handler, with its options.
func TestOtherRecordsGoToStandardHandler(t *testing.T) {
	rep := func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			return slog.String(a.Key, a.Value.Duration().String())
		}
		return a
	}
	when := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	cases := []slog.Attr{
		slog.Duration("grace", 30*time.Second),
		slog.Time("at", when),
		slog.Any("map", map[string]int{"a": 1}),
		slog.Float64("nan", math.NaN()),
		slog.Float64("inf", math.Inf(1)),
		slog.String("", "empty key"),
		slog.Group("outer", slog.Group("inner", slog.Int("x", 1))),
	}
	for _, json := range []bool{false, true} {
		for _, a := range cases {
			r := slog.NewRecord(when, slog.LevelWarn, "other", 0)
			r.AddAttrs(slog.Int("n", 1), a)
			var want, got bytes.Buffer
			opts := &slog.HandlerOptions{ReplaceAttr: rep}
			std := slog.Handler(slog.NewTextHandler(&want, opts))
			if json {
				std = slog.NewJSONHandler(&want, opts)
			}
			_ = std.Handle(context.Background(), r)
			_ = New(&got, json, opts).Handle(context.Background(), r)
			if got.String() != want.String() {
				t.Errorf("%s json=%v\n got %q\nwant %q", a.Key, json, got.String(), want.String())
			}
		}
	}
	var got bytes.Buffer
	r := slog.NewRecord(when, slog.LevelInfo, "grace", 0)
	r.AddAttrs(slog.Duration("grace", 30*time.Second))
	_ = New(&got, false, &slog.HandlerOptions{ReplaceAttr: rep}).Handle(context.Background(), r)
	if !strings.Contains(got.String(), "grace=30s") {
		t.Fatalf("ReplaceAttr not applied by the fallback: %q", got.String())
	}
}

func TestEnabled(t *testing.T) {
	h := New(&bytes.Buffer{}, false, &slog.HandlerOptions{Level: slog.LevelWarn})
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelWarn) {
		t.Fatal("level not applied")
	}
	if !New(&bytes.Buffer{}, true, nil).Enabled(context.Background(), slog.LevelInfo) {
		t.Fatal("default level should be info")
	}
}

func FuzzMatchesStandardHandlers(f *testing.F) {
	for i, s := range tricky {
		f.Add(s, tricky[(i+1)%len(tricky)], floats[i%len(floats)], int64(i)-5, i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, key, val string, x float64, n int64, json bool) {
		r := slog.NewRecord(time.Unix(n, n*7919%1e9).UTC(), slog.LevelInfo, val, 0)
		r.AddAttrs(slog.String(key, val), slog.Float64("x"+key, x), slog.Int64("n", n),
			slog.Attr{Key: "g", Value: slog.GroupValue(slog.String(val, key))})
		sameLine(t, json, r)
	})
}

func BenchmarkRequestLine(b *testing.B) {
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("model", "m"), slog.String("bucket", "all"),
		slog.Attr{Key: "engines", Value: slog.GroupValue(slog.String("plain", "E1"))},
		slog.Int("status", 200), slog.Float64("duration_ms", 1.234), slog.Int64("input_tokens", 17))
	for _, json := range []bool{false, true} {
		name := "text"
		if json {
			name = "json"
		}
		std := slog.Handler(slog.NewTextHandler(discard{}, nil))
		if json {
			std = slog.NewJSONHandler(discard{}, nil)
		}
		b.Run(name+"/slog", func(b *testing.B) {
			for b.Loop() {
				_ = std.Handle(context.Background(), r)
			}
		})
		h := New(discard{}, json, nil)
		b.Run(name+"/logline", func(b *testing.B) {
			for b.Loop() {
				_ = h.Handle(context.Background(), r)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
