package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"charm.land/lipgloss/v2"
)

// bucketRow is a bucket with its rates, as the buckets view lists it.
type bucketRow struct {
	*Bucket
	bucketRates
	index int // position in the snapshot, which lists buckets in the router's order
}

// bucketSorts are the buckets view's sort keys, in the order s cycles through them.
var bucketSorts = []sortKey[bucketRow]{
	{name: "bucket", col: "BUCKET"},
	{name: "requests/s", col: "REQ/s", desc: true, key: func(r bucketRow) float64 { return r.requests.orUnknown() }},
	{name: "errors/s", col: "ERR/s", desc: true, key: func(r bucketRow) float64 { return r.errors.orUnknown() }},
	{name: "fall-throughs/s", col: "FALL/s", desc: true, key: func(r bucketRow) float64 { return r.fallthroughs.orUnknown() }},
}

func (m Model) bucketsTable() *table {
	t := &table{cols: []column{
		{title: "MODEL", flex: true, minWidth: 10, priority: 8},
		{title: "BUCKET"},
		{title: "REQ/s", right: true, priority: 1},
		{title: "REQUESTS", right: true, priority: 5},
		{title: "FALL/s", right: true, priority: 4},
		{title: "FALLS", right: true, priority: 6},
		{title: "ERR/s", right: true, priority: 3},
		{title: "ERRORS", flex: true, minWidth: 7, priority: 7},
		{title: "TTFT EST", right: true, priority: 9},
		{title: "TPS EST", right: true, priority: 10},
		{title: "SLO MET", right: true, priority: 11},
	}}
	var rows []bucketRow
	for i := range m.snap.Buckets {
		b := &m.snap.Buckets[i]
		if m.matches(b.Model, b.ID) {
			rows = append(rows, bucketRow{b, m.snap.buckets[b.key()], i})
		}
	}
	_, desc, _ := m.sortState()
	sortRows(rows, bucketSorts[m.sortBy[viewBuckets]], desc, func(a, b bucketRow) int { return cmp.Compare(a.index, b.index) })
	for _, r := range rows {
		var st lipgloss.Style
		if r.errors.ok && r.errors.perS > 0 {
			st = m.styles.failed
		}
		t.rows = append(t.rows, row{
			cells: []string{
				r.Model, r.ID, formatRate(r.requests), fmt.Sprint(r.Requests), formatRate(r.fallthroughs),
				fmt.Sprint(r.Fallthroughs), formatRate(r.errors), errorsByStatus(r.ByStatus),
				estimateCell(r.TTFTEstimate, "ms"), estimateCell(r.TPSEstimate, "/s"), sloMetCell(r.SLOMet, r.SLOMissed),
			},
			style: st,
		})
	}
	return t
}

// errorsByStatus lists the statuses other than 2xx with their totals, most frequent
// first: "503×4 400×1", or "-".
func errorsByStatus(byStatus map[string]float64) string {
	var codes []string
	for code, n := range byStatus {
		if !strings.HasPrefix(code, "2") && n > 0 {
			codes = append(codes, code)
		}
	}
	if len(codes) == 0 {
		return "-"
	}
	slices.SortFunc(codes, func(a, b string) int {
		return cmp.Or(cmp.Compare(byStatus[b], byStatus[a]), cmp.Compare(a, b))
	})
	for i, code := range codes {
		codes[i] = fmt.Sprintf("%s×%v", code, byStatus[code])
	}
	return strings.Join(codes, " ")
}

// estimateCell prints an SLO estimate with its unit, marked "~" when learned from
// observations rather than configured: "150ms", "~132ms", or "-" when there is none.
func estimateCell(e *Estimate, unit string) string {
	if e == nil || e.Source == "none" || e.Source == "" {
		return "-"
	}
	mark := ""
	if e.Source == "learned" {
		mark = "~"
	}
	return fmt.Sprintf("%s%.0f%s", mark, e.Value, unit)
}

// sloMetCell is the share of the bucket's selections with a target whose estimate met it,
// over every target: "92%", or "-" when no selection had a target.
func sloMetCell(met, missed map[string]float64) string {
	var m, n float64
	for _, v := range met {
		m += v
	}
	for _, v := range missed {
		n += v
	}
	if m+n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*m/(m+n))
}
