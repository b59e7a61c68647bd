package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// matches reports whether the filter (case-insensitive, a substring) selects a row with
// this model and these other names (an engine's id and buckets, a bucket's id).
func (m Model) matches(model string, names ...string) bool {
	f := strings.ToLower(m.filter)
	if f == "" || strings.Contains(strings.ToLower(model), f) {
		return true
	}
	return slices.ContainsFunc(names, func(b string) bool { return strings.Contains(strings.ToLower(b), f) })
}

// sortKey is one way to order a view's rows. A nil key is the view's natural order;
// desc is the direction a key starts in (busiest first for the numbers).
type sortKey[T any] struct {
	name string
	col  string // the title of the column it orders, which the header marks
	desc bool
	key  func(T) float64
}

// orUnknown is the rate, or -1 so that unknown rates sort after every known one.
func (r rate) orUnknown() float64 {
	if !r.ok {
		return -1
	}
	return r.perS
}

// numSorts is how many sort keys each view has; decisions have none (newest first).
var numSorts = [numViews]int{viewEngines: len(engineSorts), viewBuckets: len(bucketSorts)}

// sortState is the current view's sort key and direction; ok is false for a view that is
// not sorted.
func (m Model) sortState() (name string, desc, ok bool) {
	name, _, desc, ok = m.sortColumn()
	return name, desc, ok
}

// sortColumn is sortState with the title of the column the key orders.
func (m Model) sortColumn() (name, col string, desc, ok bool) {
	i := m.sortBy[m.view]
	switch m.view {
	case viewEngines:
		name, col, desc = engineSorts[i].name, engineSorts[i].col, engineSorts[i].desc
	case viewBuckets:
		name, col, desc = bucketSorts[i].name, bucketSorts[i].col, bucketSorts[i].desc
	default:
		return "", "", false, false
	}
	return name, col, desc != m.reversed[m.view], true
}

// sortRows orders rows by k in direction desc. Ties, and a nil key, fall back to natural,
// which runs ascending under a numeric key so equal rows keep a stable, readable order.
func sortRows[T any](rows []T, k sortKey[T], desc bool, natural func(a, b T) int) {
	slices.SortStableFunc(rows, func(a, b T) int {
		var c int
		if k.key == nil {
			c = natural(a, b)
		} else if c = cmp.Compare(k.key(a), k.key(b)); c == 0 {
			return natural(a, b)
		}
		if desc {
			return -c
		}
		return c
	})
}

// formatDuration is a short duration: "0.4s", "12s", "3m05s", "2h07m"; "-" when negative.
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// orDash shows an empty cell as "-", which a request refused before routing leaves.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatRate is a rate with the precision a glance needs: "-", "0", "0.5", "15".
func formatRate(r rate) string {
	switch {
	case !r.ok:
		return "-"
	case r.perS == 0:
		return "0"
	case r.perS < 10:
		return fmt.Sprintf("%.1f", r.perS)
	}
	return fmt.Sprintf("%.0f", r.perS)
}

// formatMS is a duration in milliseconds, with a decimal below ten.
func formatMS(ms float64) string {
	if ms < 10 {
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.0f", ms)
}

// formatTokens is a token count in at most five cells: "950", "12.3k", "500k", "1.5M".
func formatTokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 100_000:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1e3)) + "k"
	case n < 1_000_000:
		return fmt.Sprintf("%dk", n/1000)
	}
	return trimZero(fmt.Sprintf("%.1f", float64(n)/1e6)) + "M"
}

// trimZero drops a ".0" decimal.
func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }
