package tui

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"

	tea "charm.land/bubbletea/v2"
)

func TestDecode(t *testing.T) {
	st, err := Decode([]byte(`{"engines": [{"id": "E1", "from_the_future": [1, 2]}], "later": {}}`))
	if err != nil {
		t.Fatalf("unknown fields: %v", err)
	}
	e := st.Engines[0]
	if e.ID != "E1" || e.Healthy || e.Load != nil || e.Groups != nil || len(st.Buckets) != 0 {
		t.Errorf("missing fields are not zero: %+v", st)
	}
	for _, bad := range []string{``, `[]`, `null`, `{"engines": {"id": "E1"}}`, `{"engines": [{"inflight": "many"}]}`, `{"time": "yesterday"}`} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

// TestMalformedNeverCrashes feeds the model snapshots that decode but make no sense: it
// must render them, not panic.
func TestMalformedNeverCrashes(t *testing.T) {
	odd := []string{
		`{}`,
		`{"engines": [{}], "buckets": [{}], "decisions": [{}]}`,
		`{"engines": [{"id": "E1", "healthy": true, "load": {"running": -5, "waiting": -1, "native": true, "max_kv_tokens": -1, "max_running": -3}, "report_age_ms": 1e300}]}`,
		`{"engines": [{"id": "E1", "groups": ["", "/", "a/b/c"]}, {"id": "E1"}], "uptime_s": -1}`,
		`{"buckets": [{"id": "b", "by_status": {"": 1, "5": -2}}], "decisions": [{"engines": {"": ""}, "reasons": {"x": ""}, "time": "1970-01-01T00:00:00Z"}]}`,
	}
	for _, s := range odd {
		st, err := Decode([]byte(s))
		if err != nil {
			t.Fatalf("Decode(%s): %v", s, err)
		}
		m := update(New(Options{}), resultMsg{state: st, at: t0}, resultMsg{state: st, at: t0})
		for _, k := range []string{"tab", "tab", "tab", "s", "s", "s", "s", "s", "s", "s"} {
			m = update(m, keys(k)...)
			checkFits(t, m.View().Content, defaultWidth, 0)
		}
	}
}

// dirty is a string that would colour, retitle and break a terminal if printed as is: an
// SGR and an OSC sequence, a CSI in its one-byte C1 form, CR, LF, tab, DEL and BEL.
const dirty = "E\x1b[31m1\nX\r\t\x7f\u009b2J\x1b]0;pwned\x07"

// TestDecodeCleansEveryString fills every string of a State, map keys included, with
// control characters and checks that none survives Decode, so a field added later cannot
// be forgotten.
func TestDecodeCleansEveryString(t *testing.T) {
	var st State
	fill(reflect.ValueOf(&st).Elem())
	filled := 0
	walkStrings(reflect.ValueOf(&st).Elem(), func(string) { filled++ })
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	walkStrings(reflect.ValueOf(got).Elem(), func(s string) {
		n++
		if s != clean(dirty) {
			t.Errorf("decoded %q, want %q", s, clean(dirty))
		}
	})
	if n != filled {
		t.Fatalf("%d strings decoded, %d filled in", n, filled)
	}
}

// fill sets every settable string reachable from v to dirty, giving slices and maps one
// element and pointers a value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(dirty)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		key, val := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(key)
		fill(val)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(key, val)
	}
}

// walkStrings calls f with every string reachable from v through exported fields.
func walkStrings(v reflect.Value, f func(string)) {
	switch v.Kind() {
	case reflect.String:
		f(v.String())
	case reflect.Pointer:
		if !v.IsNil() {
			walkStrings(v.Elem(), f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkStrings(v.Field(i), f)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkStrings(v.Index(i), f)
		}
	case reflect.Map:
		for k, e := range v.Seq2() {
			walkStrings(k, f)
			walkStrings(e, f)
		}
	}
}

func TestCleanMergesKeys(t *testing.T) {
	st, err := Decode([]byte(`{"buckets": [{"by_status": {"5\u001b0": 2, "5\u00070": 3, "200": 1}}],
		"decisions": [{"reasons": {"a\u0007": "second", "a\u001b": "first"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Buckets[0].ByStatus; len(got) != 2 || got["5\uFFFD0"] != 5 || got["200"] != 1 {
		t.Errorf("by_status = %v, want the two cleaned statuses added up", got)
	}
	if got := st.Decisions[0].Reasons; len(got) != 1 || got["a\uFFFD"] != "second" {
		t.Errorf("reasons = %v, want the value of the first key in byte order", got)
	}
}

// dirtyState is a snapshot whose every printed string carries control characters.
func dirtyState(t *testing.T) *State {
	t.Helper()
	d, err := json.Marshal(dirty)
	if err != nil {
		t.Fatal(err)
	}
	q := string(d)
	st, err := Decode([]byte(`{"time": "2026-01-02T15:04:05Z",
		"engines": [{"id": ` + q + `, "url": ` + q + `, "model": ` + q + `, "role": ` + q + `, "groups": [` + q + `],
			"healthy": false, "health_error": ` + q + `, "load_error": ` + q + `, "report_age_ms": -1}],
		"buckets": [{"model": ` + q + `, "id": ` + q + `, "requests": 3, "by_status": {` + q + `: 3}}],
		"decisions": [{"time": "2026-01-02T15:04:04Z", "model": ` + q + `, "bucket": ` + q + `, "status": 503,
			"engines": {` + q + `: ` + q + `}, "reasons": {` + q + `: ` + q + `}},
			{"time": "2026-01-02T15:04:04Z", "model": "m", "status": 502, "error": ` + q + `}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestOnceControlCharacters checks that `router top --once` prints the router's strings
// without their control characters: no escape code, and one line per engine.
func TestOnceControlCharacters(t *testing.T) {
	st := dirtyState(t)
	got, err := Once(context.Background(), func(context.Context) (*State, error) { return st, nil }, "http://127.0.0.1:30000")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsFunc(strings.ReplaceAll(got, "\n", ""), unicode.IsControl) {
		t.Errorf("--once output has control characters:\n%q", got)
	}
	if lines := strings.Count(got, "\n"); lines != 6 { // title, header, one row, blank, two errors
		t.Errorf("--once output has %d lines, want 6:\n%s", lines, got)
	}
	checkGolden(t, got)
}

// TestViewControlCharacters renders every view of a snapshot full of control characters,
// without colours so that any escape code left would be the router's: none may remain
// and each view must fit its terminal.
func TestViewControlCharacters(t *testing.T) {
	m := New(Options{Source: "http://127.0.0.1:30000", Now: fixedClock(t0)})
	m.styles = plainStyles()
	m.help.Styles = m.styles.help
	st := dirtyState(t)
	var tm tea.Model = update(m, tea.WindowSizeMsg{Width: 120, Height: 12}, resultMsg{state: st, at: t0})
	for _, view := range []string{"1", "2", "3"} {
		tm = update(tm, keys(view)...)
		got := tm.View().Content
		if strings.ContainsFunc(strings.ReplaceAll(got, "\n", ""), unicode.IsControl) {
			t.Errorf("view %s has control characters:\n%q", view, got)
		}
		checkFits(t, got, 120, 12)
		if !strings.Contains(got, clean(dirty)) {
			t.Errorf("view %s does not show the cleaned string:\n%s", view, got)
		}
	}
}

// TestHealthCell names the breaker when it, not a failed health check, keeps an engine out.
func TestHealthCell(t *testing.T) {
	for _, tc := range []struct {
		e    Engine
		want string
	}{
		{Engine{Healthy: true, Breaker: "open"}, "breaker"},
		{Engine{Healthy: true, Breaker: "half_open"}, "probing"},
		{Engine{Healthy: false, Breaker: "open"}, "down"},
		{Engine{Healthy: true, Breaker: "closed"}, "stale"},
	} {
		if got := tc.e.health(tc.e.condition()); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}

// The title line shows the running requests against the limit and, when requests may
// wait, how many wait and for which models.
func TestTitleShowsQueue(t *testing.T) {
	st := readState(t, "state-1.json")
	st.Queue = &Queue{Size: 100, Running: 7, MaxConcurrent: 8, Waiting: map[string]int{"llama": 3, "qwen": 0, "gemma": 2}}
	m := update(New(Options{Source: "http://127.0.0.1:30000", Now: fixedClock(t0)}), tea.WindowSizeMsg{Width: 200, Height: 20}, resultMsg{state: st, at: t0})
	want := "7/8 running · 5 waiting (gemma 2, llama 3) of 100 per model"
	if got := m.View().Content; !strings.Contains(got, want) {
		t.Errorf("view lacks %q:\n%s", want, got)
	}
	st.Queue = &Queue{Running: 1, MaxConcurrent: 8}
	m = update(New(Options{Source: "http://127.0.0.1:30000", Now: fixedClock(t0)}), tea.WindowSizeMsg{Width: 200, Height: 20}, resultMsg{state: st, at: t0})
	if got := m.View().Content; !strings.Contains(got, "1/8 running") || strings.Contains(got, "waiting") {
		t.Errorf("without a queue the title must show the running requests alone:\n%s", got)
	}
}
