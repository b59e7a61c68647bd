package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// t0 is the time of testdata/state-1.json; state-2.json is two seconds later.
var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// readState decodes a snapshot under testdata.
func readState(t *testing.T, name string) *State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fixedClock returns a clock that always reads at.
func fixedClock(at time.Time) func() time.Time { return func() time.Time { return at } }

// update feeds msgs to m in order, dropping the commands.
func update(m tea.Model, msgs ...tea.Msg) tea.Model {
	for _, msg := range msgs {
		m, _ = m.Update(msg)
	}
	return m
}

// polled is a model at width×height that has seen both fixture snapshots, so rates and
// the sparkline have two points.
func polled(t *testing.T, width, height int) tea.Model {
	t.Helper()
	m := New(Options{Source: "http://127.0.0.1:30000", Now: fixedClock(t0)})
	return update(m,
		tea.WindowSizeMsg{Width: width, Height: height},
		resultMsg{state: readState(t, "state-1.json"), at: t0},
		resultMsg{state: readState(t, "state-2.json"), at: t0.Add(2 * time.Second)},
	)
}

// keys turns key names into key presses: "tab", "shift+tab", "esc", "enter",
// "backspace", "down", "up", or a single character.
func keys(names ...string) []tea.Msg {
	special := map[string]tea.KeyPressMsg{
		"tab":       {Code: tea.KeyTab},
		"shift+tab": {Code: tea.KeyTab, Mod: tea.ModShift},
		"esc":       {Code: tea.KeyEscape},
		"enter":     {Code: tea.KeyEnter},
		"backspace": {Code: tea.KeyBackspace},
		"down":      {Code: tea.KeyDown},
		"up":        {Code: tea.KeyUp},
		"ctrl+c":    {Code: 'c', Mod: tea.ModCtrl},
	}
	var msgs []tea.Msg
	for _, n := range names {
		if k, ok := special[n]; ok {
			msgs = append(msgs, k)
			continue
		}
		r := []rune(n)
		if len(r) != 1 {
			panic("keys: unknown key " + n)
		}
		msgs = append(msgs, tea.KeyPressMsg{Code: r[0], Text: n})
	}
	return msgs
}

// screen is what a terminal shows for m: its view without escape codes.
func screen(m tea.Model) string { return ansi.Strip(m.View().Content) }

// checkGolden compares got with testdata/<test name>.golden; ROUTER_UPDATE=1 rewrites the
// file instead, like the testscripts' expectations.
func checkGolden(t *testing.T, got string) {
	t.Helper()
	path := filepath.Join("testdata", filepath.FromSlash(t.Name())+".golden")
	if os.Getenv("ROUTER_UPDATE") != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with ROUTER_UPDATE=1 to create it)", err)
	}
	if string(want) == got {
		return
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gotLines), len(wantLines)) {
		g, w := "(none)", "(none)"
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Errorf("view differs from %s at line %d (ROUTER_UPDATE=1 rewrites it)\ngot:  %q\nwant: %q\n--- got\n%s", path, i+1, g, w, got)
			return
		}
	}
}

// checkFits fails when a line of s is wider than width or s has more than height lines.
func checkFits(t *testing.T, s string, width, height int) {
	t.Helper()
	lines := strings.Split(s, "\n")
	if height > 0 && len(lines) > height {
		t.Errorf("%d lines, terminal has %d", len(lines), height)
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > width {
			t.Errorf("line %d is %d wide, terminal has %d: %q", i+1, w, width, l)
		}
	}
}
