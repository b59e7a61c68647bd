package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

const (
	// defaultWidth is assumed until the terminal reports its size.
	defaultWidth = 80
	// staleAge marks a load report as old. It is the router's default freshness window:
	// a router with a longer window still hands out reports this old.
	staleAge = 2 * time.Second
	// sparkWidth is the load sparkline's width in cells, six seconds each.
	sparkWidth = 10
	// saturatedKV is the KV cache usage from which an engine counts as saturated.
	saturatedKV = 0.9
	// bannerLines caps the disconnected banner, for long errors on narrow terminals.
	bannerLines = 3
)

// View renders the monitor full-screen.
func (m Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "router top"
	return v
}

// Once polls the router once, with the monitor's time limit, and renders the engines
// view in plain text at its natural width, which is what `router top --once` prints.
// Rates need two polls, so they show as "-".
func Once(ctx context.Context, fetch FetchFunc, source string) (string, error) {
	st, err := fetch.bounded(ctx)
	if err != nil {
		return "", err
	}
	m := New(Options{Source: source})
	m.styles, m.once = plainStyles(), true
	m.snap = m.snap.next(st, m.opts.Now())
	lines := append([]string{m.titleLine(0)}, m.body(0)...)
	if notes := m.engineNotes(0); len(notes) > 0 {
		lines = append(append(lines, ""), notes...)
	}
	return strings.Join(lines, "\n") + "\n", nil
}

func (m Model) render() string {
	width := m.width
	if width <= 0 {
		width = defaultWidth
	}
	top := []string{m.titleLine(width)}
	if m.err != nil {
		top = append(top, m.banner(width)...)
	}
	top = append(top, m.tabsLine(width))
	var body, notes []string
	switch {
	case m.help.ShowAll:
		body = m.helpScreen(width)
	case m.view == viewEngines && m.snap != nil:
		body, notes = m.body(width), m.engineNotes(width)
	default:
		body = m.body(width)
	}
	bottom := []string{m.footer(width)}
	if avail := m.height - len(top) - len(bottom); m.height > 0 {
		// Rows come first: the notes show only in the room the table leaves. The key help
		// sits on the last line, where the eye finds it, as in top(1).
		body = m.fit(body, avail, width)
		if len(notes) > 0 && len(body)+1+len(notes) <= avail {
			body = append(append(body, ""), notes...)
		}
		for len(body) < avail {
			body = append(body, "")
		}
	} else if len(notes) > 0 {
		body = append(append(body, ""), notes...)
	}
	return strings.Join(slices.Concat(top, body, bottom), "\n")
}

// fit shows as many rows of body (a header line and rows) as avail lines hold, from the
// scroll offset, with a line saying which rows are shown when they are not all.
func (m Model) fit(body []string, avail, width int) []string {
	if len(body) <= max(avail, 1) {
		return body
	}
	if avail < 3 {
		return body[:max(avail, 0)]
	}
	rows, shown := body[1:], avail-2
	first := min(m.offset, len(rows)-shown)
	out := append([]string{body[0]}, rows[first:first+shown]...)
	more := fmt.Sprintf("rows %d-%d of %d · ↑/↓ to scroll", first+1, first+shown, len(rows))
	return append(out, m.styles.dim.Render(clip(more, width)))
}

func (m Model) titleLine(width int) string {
	parts := []string{m.opts.Source}
	if s := m.snap; s != nil {
		parts = append(parts, "up "+formatDuration(time.Duration(s.UptimeS*float64(time.Second))))
		parts = append(parts, engineSummary(s.Engines))
		if s.Queue != nil {
			parts = append(parts, s.Queue.summary())
		}
		if s.Draining {
			parts = append(parts, "draining")
		}
	}
	title := strings.Join(parts, " · ")
	// The name is left out on a narrow terminal: the window title still has it.
	if named := "router top · " + title; width <= 0 || ansi.StringWidth(named) <= width {
		title = named
	}
	return m.styles.title.Render(clip(title, width))
}

// engineSummary counts engines by condition: "7 engines: 1 down, 2 stale".
func engineSummary(engines []Engine) string {
	var n [numConditions]int
	for i := range engines {
		n[engines[i].condition()]++
	}
	var bad []string
	for c := numConditions - 1; c > condUp; c-- {
		if n[c] > 0 {
			bad = append(bad, fmt.Sprintf("%d %s", n[c], c))
		}
	}
	s := fmt.Sprintf("%d engines", len(engines))
	if len(bad) == 0 {
		return s + ": all up"
	}
	return s + ": " + strings.Join(bad, ", ")
}

// banner says why the router is disconnected and when the next try is, wrapped to the
// width so the reason is readable on a narrow terminal.
func (m Model) banner(width int) []string {
	text := fmt.Sprintf("disconnected: %v · retrying in %s", m.err, formatDuration(m.retry))
	if m.snap != nil {
		text += fmt.Sprintf(" · the data below is %s old", formatDuration(m.errAge))
	}
	lines := wrap(text, width, "", "")
	if len(lines) > bannerLines {
		lines = lines[:bannerLines]
		lines[bannerLines-1] = ansi.Truncate(lines[bannerLines-1], width-1, "") + "…"
	}
	for i, l := range lines {
		lines[i] = m.styles.banner.Render(l)
	}
	return lines
}

func (m Model) tabsLine(width int) string {
	var b strings.Builder
	for v := range numViews {
		if v > 0 {
			b.WriteByte(' ')
		}
		if v == m.view {
			b.WriteString(m.styles.activeTab.Render("[" + viewNames[v] + "]"))
		} else {
			b.WriteString(m.styles.tab.Render(" " + viewNames[v] + " "))
		}
	}
	status := []string{"newest first"}
	if name, desc, ok := m.sortState(); ok {
		arrow := "▲"
		if desc {
			arrow = "▼"
		}
		status[0] = "sort " + name + " " + arrow
	}
	if m.filter != "" {
		status = append(status, fmt.Sprintf("filter %q", m.filter))
	}
	if m.paused {
		status = append(status, "PAUSED")
	}
	line := b.String() + "  " + m.styles.dim.Render(strings.Join(status, " · "))
	return ansi.Truncate(line, width, "")
}

func (m Model) footer(width int) string {
	if m.editing {
		return clip("filter: "+m.filter+"█  (enter keeps it, esc clears it)", width)
	}
	// help drops the items that do not fit but, with no room for its ellipsis, overflows.
	return clip(m.help.ShortHelpView(m.keys.ShortHelp()), width)
}

// helpScreen is the full key list and what the colours mean.
func (m Model) helpScreen(width int) []string {
	lines := strings.Split(m.help.FullHelpView(m.keys.FullHelp()), "\n")
	for i, l := range lines {
		lines[i] = clip(l, width)
	}
	legend := []struct {
		style func(...string) string
		text  string
	}{
		{m.styles.down.Render, "down: the router's health check fails"},
		{m.styles.stale.Render, fmt.Sprintf("stale: no usable load report, or one older than %s", staleAge)},
		{m.styles.saturated.Render, fmt.Sprintf("saturated: requests waiting, running at the engine's maximum, or KV cache ≥ %.0f%%", saturatedKV*100)},
	}
	lines = append(lines, "", clip("Engine rows:", width))
	for _, l := range legend {
		for _, w := range wrap(l.text, width, "  ", "    ") {
			lines = append(lines, l.style(w))
		}
	}
	lines = append(lines, "")
	return append(lines, wrap("Rates are per second between the last two polls. LOAD 1m is running plus waiting requests over the last minute, scaled to the engine's maximum running requests.", width, "", "")...)
}

// body is the current view's table, or a line saying why there is none.
func (m Model) body(width int) []string {
	if m.snap == nil {
		wait := "connecting to " + m.opts.Source + "…"
		if m.err != nil {
			wait = "no snapshot yet"
		}
		return []string{m.styles.dim.Render(clip(wait, width))}
	}
	var t *table
	switch m.view {
	case viewEngines:
		t = m.enginesTable()
	case viewBuckets:
		t = m.bucketsTable()
	default:
		t = m.decisionsTable()
	}
	// --once output is read by scripts too: its header keeps the plain column titles.
	if _, col, desc, ok := m.sortColumn(); ok && !m.once {
		t.sorted, t.desc = col, desc
	}
	if len(t.rows) == 0 {
		what := "no " + viewNames[m.view]
		if m.filter != "" {
			what += fmt.Sprintf(" match %q", m.filter)
		}
		return []string{m.styles.dim.Render(clip(what, width))}
	}
	return t.render(width, m.styles.header)
}

// wrap breaks text into lines of at most width cells, the first starting with indent and
// the others with hang.
func wrap(text string, width int, indent, hang string) []string {
	lines := strings.Split(ansi.Wrap(text, max(width-len(hang), 1), " "), "\n")
	for i, l := range lines {
		pre := hang
		if i == 0 {
			pre = indent
		}
		lines[i] = clip(pre+l, width)
	}
	return lines
}
