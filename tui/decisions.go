package tui

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"charm.land/lipgloss/v2"
)

func (m Model) decisionsTable() *table {
	t := &table{cols: []column{
		{title: "AGO", right: true, priority: 1},
		{title: "MODEL", flex: true, minWidth: 10, priority: 10},
		{title: "TOKENS", right: true, priority: 6},
		{title: "BUCKET", priority: 2},
		{title: "ENGINES"},
		{title: "STATUS", right: true},
		{title: "MS", right: true, priority: 4},
		{title: "REASON OR ERROR", flex: true, minWidth: 16, priority: 9},
	}}
	for _, d := range m.snap.Decisions {
		if !m.matches(d.Model, d.Bucket) {
			continue
		}
		var st lipgloss.Style
		if d.Error != "" || d.Status >= 400 {
			st = m.styles.failed
		}
		t.rows = append(t.rows, row{
			cells: []string{
				formatDuration(m.snap.at.Sub(d.Time)), orDash(d.Model), fmt.Sprint(d.InputTokens), orDash(d.Bucket),
				orDash(byStage(d.Engines, "+")), fmt.Sprint(d.Status), formatMS(d.DurationMS), d.explanation(),
			},
			style: st,
		})
	}
	return t
}

// stages are a decision's stages in the order a request passes through them.
var stages = []string{"plain", "prefill", "decode"}

// stageOrder returns a per-stage map's stages in that order, the stages this version does
// not know last, by name.
func stageOrder(m map[string]string) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		ia, ib := slices.Index(stages, a), slices.Index(stages, b)
		if ia < 0 {
			ia = len(stages)
		}
		if ib < 0 {
			ib = len(stages)
		}
		return cmp.Or(cmp.Compare(ia, ib), cmp.Compare(a, b))
	})
	return keys
}

// byStage joins a per-stage map's values in stage order.
func byStage(m map[string]string, sep string) string {
	var vals []string
	for _, stage := range stageOrder(m) {
		vals = append(vals, m[stage])
	}
	return strings.Join(vals, sep)
}

// explanation is the error, or the policies' reasons, stage by stage when there are
// several, after how many buckets were fallen through.
func (d *Decision) explanation() string {
	if d.Error != "" {
		return d.Error
	}
	var parts []string
	for _, stage := range stageOrder(d.Reasons) {
		if len(d.Reasons) == 1 {
			parts = append(parts, d.Reasons[stage])
		} else {
			parts = append(parts, stage+": "+d.Reasons[stage])
		}
	}
	s := strings.Join(parts, "; ")
	if d.Fallthroughs > 0 {
		s = fmt.Sprintf("after %d fall-through(s): %s", d.Fallthroughs, s)
	}
	return s
}
