package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
)

// TestView renders every view and mode from the fixtures through Update and compares the
// screens with golden files; each must also fit its terminal.
func TestView(t *testing.T) {
	tests := []struct {
		name          string
		width, height int
		keys          []string
	}{
		{name: "engines", width: 80, height: 24},
		{name: "engines_wide", width: 140, height: 24},
		{name: "engines_narrow", width: 48, height: 24},
		{name: "engines_tiny", width: 14, height: 6},
		{name: "buckets", width: 80, height: 24, keys: []string{"tab"}},
		{name: "buckets_narrow", width: 40, height: 24, keys: []string{"tab"}},
		{name: "buckets_wide", width: 140, height: 24, keys: []string{"tab"}},
		{name: "decisions", width: 80, height: 24, keys: []string{"tab", "tab"}},
		{name: "decisions_jump", width: 100, height: 24, keys: []string{"3"}},
		{name: "back_to_engines", width: 80, height: 24, keys: []string{"tab", "shift+tab"}},
		{name: "sort_load", width: 80, height: 24, keys: []string{"s"}},
		{name: "sort_load_reversed", width: 80, height: 24, keys: []string{"s", "r"}},
		{name: "sort_buckets_requests", width: 80, height: 24, keys: []string{"tab", "s"}},
		{name: "filter_typing", width: 80, height: 24, keys: []string{"/", "l", "o", "n"}},
		{name: "filter_bucket", width: 80, height: 24, keys: []string{"/", "l", "o", "n", "g", "enter"}},
		{name: "filter_model_decisions", width: 80, height: 24, keys: []string{"/", "p", "d", "enter", "3"}},
		{name: "filter_none", width: 80, height: 24, keys: []string{"/", "x", "y", "z", "enter"}},
		{name: "filter_engine_id", width: 80, height: 24, keys: []string{"/", "e", "2", "enter"}},
		{name: "filter_cleared", width: 80, height: 24, keys: []string{"/", "q", "w", "backspace", "enter", "esc"}},
		{name: "help", width: 80, height: 24, keys: []string{"?"}},
		{name: "help_narrow", width: 40, height: 40, keys: []string{"?"}},
		{name: "paused", width: 80, height: 24, keys: []string{"p"}},
		{name: "scrolled", width: 80, height: 8, keys: []string{"down", "down", "down", "down", "down", "down", "up"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := update(polled(t, tt.width, tt.height), keys(tt.keys...)...)
			got := screen(m)
			checkFits(t, got, tt.width, tt.height)
			checkGolden(t, got)
		})
	}
}

// TestHelpOpensAtTop: the help screen does not inherit the table's scroll position.
func TestHelpOpensAtTop(t *testing.T) {
	scrolled := update(polled(t, 80, 8), keys("down", "down", "down", "down", "?")...)
	fresh := update(polled(t, 80, 8), keys("?")...)
	if got, want := screen(scrolled), screen(fresh); got != want {
		t.Errorf("help after scrolling the table:\n%s\nwant it as opened directly:\n%s", got, want)
	}
}

// TestDisconnected shows a failing poll's reason, whether or not there is older data, and
// that the next successful poll clears it.
func TestDisconnected(t *testing.T) {
	reasons := map[string]error{
		"unreachable":  fmt.Errorf("%w http://127.0.0.1:30000: dial tcp 127.0.0.1:30000: connect: connection refused", ErrUnreachable),
		"unauthorized": fmt.Errorf("%w: the router refused the admin token", ErrUnauthorized),
		"malformed":    fmt.Errorf("reading http://127.0.0.1:30000/admin/state: %w: unexpected end of JSON input", ErrMalformed),
	}
	for name, err := range reasons {
		t.Run(name, func(t *testing.T) {
			m := update(polled(t, 80, 16), resultMsg{err: err, at: t0.Add(5 * time.Second)})
			got := screen(m)
			checkFits(t, got, 80, 16)
			checkGolden(t, got)

			m = update(m, resultMsg{state: readState(t, "state-2.json"), at: t0.Add(6 * time.Second)})
			if s := screen(m); strings.Contains(s, "disconnected") {
				t.Errorf("still disconnected after a good poll:\n%s", s)
			}
		})
	}
	t.Run("never_connected", func(t *testing.T) {
		m := New(Options{Source: "http://127.0.0.1:30000"})
		m2 := update(m, tea.WindowSizeMsg{Width: 40, Height: 10}, resultMsg{err: reasons["unreachable"]})
		got := screen(m2)
		checkFits(t, got, 40, 10)
		checkGolden(t, got)
	})
}

func TestConnecting(t *testing.T) {
	m := update(New(Options{Source: "http://127.0.0.1:30000"}), tea.WindowSizeMsg{Width: 80, Height: 5})
	checkGolden(t, screen(m))
}

// TestColours checks that each engine condition colours its row with its style.
func TestColours(t *testing.T) {
	m := polled(t, 140, 24)
	st := colourStyles()
	for id, cond := range map[string]condition{"E2": condSaturated, "E3": condDown, "Q1": condStale, "D1": condStale} {
		want, _, _ := strings.Cut(st.condition(cond).Render("x"), "x")
		if want == "" {
			t.Fatalf("%s has no escape code", cond)
		}
		found := false
		for _, line := range strings.Split(m.View().Content, "\n") {
			if strings.HasPrefix(line, want+id+" ") {
				found = true
			}
		}
		if !found {
			t.Errorf("row %s is not drawn %s (%q)", id, cond, want)
		}
	}
	for _, line := range strings.Split(m.View().Content, "\n") {
		if strings.HasPrefix(line, "E1 ") {
			return // a healthy engine's row is left uncoloured
		}
	}
	t.Error("row E1 is coloured or missing")
}

func TestCondition(t *testing.T) {
	native := func(running, waiting, used int64) *Load {
		return &Load{Running: running, Waiting: waiting, Native: true, UsedKVTokens: used, MaxKVTokens: 1000, MaxRunning: 8}
	}
	tests := []struct {
		name string
		e    Engine
		want condition
	}{
		{"idle", Engine{Healthy: true, Load: native(0, 0, 0), ReportAgeMS: 100}, condUp},
		{"unhealthy beats everything", Engine{Healthy: false, Load: native(8, 3, 1000)}, condDown},
		{"open breaker is down though healthy", Engine{Healthy: true, Breaker: "open", Load: native(0, 0, 0), ReportAgeMS: 100}, condDown},
		{"half-open breaker is not down", Engine{Healthy: true, Breaker: "half_open", Load: native(0, 0, 0), ReportAgeMS: 100}, condUp},
		{"no report", Engine{Healthy: true, ReportAgeMS: -1}, condStale},
		{"report but negative age", Engine{Healthy: true, Load: native(0, 0, 0), ReportAgeMS: -1}, condStale},
		{"old report", Engine{Healthy: true, Load: native(0, 0, 0), ReportAgeMS: 2000}, condStale},
		{"queueing", Engine{Healthy: true, Load: native(1, 1, 0), ReportAgeMS: 100}, condSaturated},
		{"at max running", Engine{Healthy: true, Load: native(8, 0, 0), ReportAgeMS: 100}, condSaturated},
		{"kv nearly full", Engine{Healthy: true, Load: native(1, 0, 900), ReportAgeMS: 100}, condSaturated},
		{"kv below the mark", Engine{Healthy: true, Load: native(1, 0, 899), ReportAgeMS: 100}, condUp},
		{"vllm metrics report: kv nearly full", Engine{Healthy: true, Load: &Load{Running: 1, KVKnown: true, UsedKVTokens: 900, MaxKVTokens: 1000}, ReportAgeMS: 100}, condSaturated},
		{"basic report ignores capacities", Engine{Healthy: true, Load: &Load{Running: 50, MaxRunning: 8, UsedKVTokens: 9, MaxKVTokens: 1}, ReportAgeMS: 100}, condUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.e.condition(); got != tt.want {
				t.Errorf("condition = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestPolling follows the poll loop: a result schedules the next poll, pausing drops
// results of the abandoned loop, resuming polls at once with the injected fetch and
// clock, and failures back off.
func TestPolling(t *testing.T) {
	calls := 0
	fetch := func(context.Context) (*State, error) {
		calls++
		return &State{Time: t0}, nil
	}
	var m tea.Model = New(Options{Fetch: fetch, Now: fixedClock(t0.Add(time.Hour))})

	msg := m.Init()()
	res, ok := msg.(resultMsg)
	if !ok || calls != 1 || res.at != t0.Add(time.Hour) || res.gen != 0 {
		t.Fatalf("Init's command returned %#v after %d fetches", msg, calls)
	}
	m, cmd := m.Update(res)
	if cmd == nil {
		t.Fatal("a result did not schedule the next poll")
	}
	if _, cmd = m.Update(pollMsg{gen: 0}); cmd == nil {
		t.Fatal("a poll message of the running loop did not poll")
	}

	m = update(m, keys("p")...)
	if _, cmd = m.Update(pollMsg{gen: 0}); cmd != nil {
		t.Error("a paused monitor polled")
	}
	if _, cmd = m.Update(resultMsg{gen: 0, state: &State{}}); cmd != nil {
		t.Error("a paused monitor took a result from the abandoned loop")
	}

	m, cmd = m.Update(keys("p")[0])
	if cmd == nil {
		t.Fatal("resuming did not poll")
	}
	res = cmd().(resultMsg)
	if res.gen != 2 || calls != 2 {
		t.Fatalf("resumed poll: gen %d after %d fetches, want gen 2 after 2", res.gen, calls)
	}
	if _, cmd = m.Update(resultMsg{gen: 0, err: errors.New("late")}); cmd != nil {
		t.Error("a result of the abandoned loop was taken after resuming")
	}

	m, _ = m.Update(resultMsg{gen: 2, err: ErrUnreachable})
	m, _ = m.Update(resultMsg{gen: 2, err: ErrUnreachable})
	if got := m.(Model).retry; got != 2*time.Second {
		t.Errorf("retry after two failures = %s, want 2s", got)
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		interval time.Duration
		fails    int
		want     time.Duration
	}{
		{time.Second, 1, time.Second},
		{time.Second, 2, 2 * time.Second},
		{time.Second, 4, 8 * time.Second},
		{time.Second, 5, maxRetry},
		{time.Second, 500, maxRetry},
		{30 * time.Second, 3, 30 * time.Second},
		{100 * time.Millisecond, 3, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := backoff(tt.interval, tt.fails); got != tt.want {
			t.Errorf("backoff(%s, %d) = %s, want %s", tt.interval, tt.fails, got, tt.want)
		}
	}
}

func TestQuit(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c"} {
		_, cmd := polled(t, 80, 24).Update(keys(k)[0])
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s did not quit", k)
		}
	}
	// While typing a filter, q is a letter.
	m := update(polled(t, 80, 24), keys("/")...)
	m, cmd := m.Update(keys("q")[0])
	if cmd != nil || m.(Model).filter != "q" {
		t.Errorf("q while filtering: filter %q, command %v", m.(Model).filter, cmd)
	}
}

// TestRates checks the per-second rates between the fixtures, two seconds apart, and that
// a counter going down (a restarted router) shows as unknown, not negative.
func TestRates(t *testing.T) {
	s := polled(t, 80, 24).(Model).snap
	if got := s.engines["E1"].picks; got != (rate{perS: 10, ok: true}) {
		t.Errorf("E1 picks = %+v, want 10/s", got)
	}
	if got := s.engines["E2"].rejections; got != (rate{perS: 2, ok: true}) {
		t.Errorf("E2 rejections = %+v, want 2/s", got)
	}
	if got := s.buckets["llama-3.1-8b-instruct\x00short"].errors; got != (rate{perS: 1.5, ok: true}) {
		t.Errorf("short errors = %+v, want 1.5/s", got)
	}
	restarted := readState(t, "state-1.json")
	restarted.Time = t0.Add(3 * time.Second)
	if got := s.next(restarted, t0).engines["E1"].picks; got.ok {
		t.Errorf("picks after a counter reset = %+v, want unknown", got)
	}
}

func TestOnce(t *testing.T) {
	st := readState(t, "state-1.json")
	var deadline bool
	got, err := Once(context.Background(), func(ctx context.Context) (*State, error) {
		_, deadline = ctx.Deadline()
		return st, nil
	}, "http://127.0.0.1:30000")
	if err != nil || !deadline {
		t.Fatalf("Once: error %v, poll had a deadline: %t", err, deadline)
	}
	checkGolden(t, got)

	if _, err := Once(context.Background(), func(context.Context) (*State, error) { return nil, ErrUnauthorized }, ""); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Once with a failing poll: %v", err)
	}
	if _, err := Once(context.Background(), func(context.Context) (*State, error) { return nil, nil }, ""); !errors.Is(err, ErrMalformed) {
		t.Errorf("Once with a poll that returned nothing: %v", err)
	}
}

// TestEveryWidthFits renders every view and the help, disconnected so the banner shows
// too, at every narrow width and then in steps: nothing may overflow the terminal.
func TestEveryWidthFits(t *testing.T) {
	for _, k := range [][]string{nil, {"tab"}, {"tab", "tab"}, {"?"}} {
		m := update(polled(t, 80, 30), keys(k...)...)
		m = update(m, resultMsg{err: ErrUnreachable, at: t0.Add(3 * time.Second)})
		for w := 1; w <= 150; w += max(1, w/20*3) {
			m = update(m, tea.WindowSizeMsg{Width: w, Height: 30})
			checkFits(t, m.View().Content, w, 30)
		}
	}
}
