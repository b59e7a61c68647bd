package tui

import (
	"slices"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// column describes one table column and how it gives way on a narrow terminal: columns
// give way in turn, the highest priority number first; a flexible column is truncated to
// minWidth at its turn, any other is dropped. Priority 0 columns are never dropped, and
// when they alone are too wide the lines are clipped.
type column struct {
	title    string
	right    bool // right-aligned, for numbers
	priority int
	flex     bool
	minWidth int
}

// row is one table row: its cells, in column order, and the style of the whole line.
type row struct {
	cells []string
	style lipgloss.Style
}

// table lays out and renders rows under a header. Cells are plain text; colour is applied
// per line after layout, so widths are never thrown off by escape codes.
type table struct {
	cols []column
	rows []row
	// sorted is the title of the column the rows are ordered by, marked in the header
	// with the direction; empty for none.
	sorted string
	desc   bool
}

// layout returns, for each column, its width, or 0 when the column is dropped to fit in
// width cells (width <= 0 means unlimited).
func (t *table) layout(width int) []int {
	widths := make([]int, len(t.cols))
	titles := make([]string, len(t.cols))
	for i, c := range t.cols {
		titles[i] = c.title
	}
	titles = t.marked(titles)
	for i := range t.cols {
		widths[i] = ansi.StringWidth(titles[i])
		for _, r := range t.rows {
			widths[i] = max(widths[i], ansi.StringWidth(r.cells[i]))
		}
	}
	if width <= 0 {
		return widths
	}
	total := func() int {
		n, shown := 0, 0
		for _, w := range widths {
			if w > 0 {
				n += w
				shown++
			}
		}
		return n + max(shown-1, 0) // one space between columns
	}
	order := make([]int, len(t.cols))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return t.cols[b].priority - t.cols[a].priority })
	for _, i := range order {
		c := t.cols[i]
		switch excess := total() - width; {
		case excess <= 0:
			return widths
		case c.flex:
			widths[i] = max(widths[i]-excess, min(widths[i], c.minWidth))
		case c.priority > 0:
			widths[i] = 0
		}
	}
	return widths
}

// render returns the header (in the header style) and one line per row, each at most
// width cells.
func (t *table) render(width int, header lipgloss.Style) []string {
	widths := t.layout(width)
	titles := make([]string, len(t.cols))
	for i, c := range t.cols {
		titles[i] = c.title
	}
	lines := []string{header.Render(t.line(t.marked(titles), widths, width))}
	for _, r := range t.rows {
		lines = append(lines, r.style.Render(t.line(r.cells, widths, width)))
	}
	return lines
}

// marked returns titles with the sorted column's title followed by ▲ or ▼.
func (t *table) marked(titles []string) []string {
	out := slices.Clone(titles)
	for i, c := range t.cols {
		if t.sorted != "" && c.title == t.sorted {
			arrow := "▲"
			if t.desc {
				arrow = "▼"
			}
			out[i] += arrow
		}
	}
	return out
}

func (t *table) line(cells []string, widths []int, width int) string {
	var b strings.Builder
	for i, w := range widths {
		if w == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		cell := ansi.Truncate(cells[i], w, "…")
		pad := strings.Repeat(" ", w-ansi.StringWidth(cell))
		if t.cols[i].right {
			b.WriteString(pad + cell)
		} else {
			b.WriteString(cell + pad)
		}
	}
	return clip(b.String(), width)
}

// clip cuts a line to width cells (no limit when width <= 0) and drops trailing spaces.
func clip(s string, width int) string {
	if width > 0 {
		s = ansi.Truncate(s, width, "")
	}
	return strings.TrimRight(s, " ")
}
