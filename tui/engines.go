package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// condition is how an engine is doing, worst last; the worst one colours its row.
type condition int

const (
	condUp condition = iota
	condSaturated
	condStale
	condDown
	numConditions
)

func (c condition) String() string {
	return [numConditions]string{"up", "saturated", "stale", "down"}[c]
}

// condition classifies the engine. Stale outranks saturated because a saturation read
// from an old report is a guess; a basic report, without capacities, is saturated only
// when requests are waiting.
func (e *Engine) condition() condition {
	switch {
	case !e.Healthy, e.Breaker == "open":
		return condDown
	case e.Load == nil || e.ReportAgeMS < 0 || e.reportAge() >= staleAge:
		return condStale
	case e.Load.Waiting > 0,
		e.Load.Native && e.Load.MaxRunning > 0 && e.Load.Running >= e.Load.MaxRunning,
		e.kvUsage() >= saturatedKV:
		return condSaturated
	}
	return condUp
}

// health is the HEALTH cell: the condition, except that an engine which passes its health
// checks but is kept out by its circuit breaker says so, since "down" would send the
// operator to the engine rather than to the failures the router saw, and an engine being
// drained or removed says that.
func (e *Engine) health(c condition) string {
	if e.State == "draining" || e.State == "leaving" {
		return e.State // taken out on purpose: no new picks, whatever its health
	}
	if e.Healthy {
		switch e.Breaker {
		case "open":
			return "breaker"
		case "half_open":
			return "probing"
		}
	}
	return c.String()
}

// reportAge is the age of the engine's load report; meaningful only when it has one.
func (e *Engine) reportAge() time.Duration {
	return time.Duration(e.ReportAgeMS * float64(time.Millisecond))
}

// kvUsage is the fraction of the KV cache in use, or -1 when the report does not say.
func (e *Engine) kvUsage() float64 {
	if e.Load == nil || !(e.Load.Native || e.Load.KVKnown) || e.Load.MaxKVTokens <= 0 {
		return -1
	}
	return float64(e.Load.UsedKVTokens) / float64(e.Load.MaxKVTokens)
}

// buckets are the buckets whose groups may pick the engine, from "bucket/stage" names.
func (e *Engine) buckets() []string {
	var out []string
	for _, g := range e.Groups {
		b, _, _ := strings.Cut(g, "/")
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// load is running plus waiting requests, or -1 when unknown.
func (e *Engine) load() float64 {
	if e.Load == nil {
		return -1
	}
	return float64(e.Load.Running + e.Load.Waiting)
}

// engineRow is an engine with its rates, as the engines view lists it.
type engineRow struct {
	*Engine
	engineRates
}

// engineSorts are the engines view's sort keys, in the order s cycles through them.
var engineSorts = []sortKey[engineRow]{
	{name: "id", col: "ID"},
	{name: "load", col: "RUN", desc: true, key: func(r engineRow) float64 { return r.load() }},
	{name: "kv", col: "KV%", desc: true, key: func(r engineRow) float64 { return r.kvUsage() }},
	{name: "in-flight", col: "INFL", desc: true, key: func(r engineRow) float64 { return float64(r.Inflight) }},
	{name: "picks/s", col: "PICK/s", desc: true, key: func(r engineRow) float64 { return r.picks.orUnknown() }},
	{name: "rejections/s", col: "REJ/s", desc: true, key: func(r engineRow) float64 { return r.rejections.orUnknown() }},
}

// engineRows are the engines the filter selects, in the chosen order.
func (m Model) engineRows() []engineRow {
	var rows []engineRow
	for i := range m.snap.Engines {
		e := &m.snap.Engines[i]
		if m.matches(e.Model, append([]string{e.ID}, e.buckets()...)...) {
			rows = append(rows, engineRow{e, m.snap.engines[e.ID]})
		}
	}
	_, desc, _ := m.sortState()
	sortRows(rows, engineSorts[m.sortBy[viewEngines]], desc, func(a, b engineRow) int { return cmp.Compare(a.ID, b.ID) })
	return rows
}

// engineNotes are the router's last health and load errors for the engines shown, which
// say why an engine is down or stale.
func (m Model) engineNotes(width int) []string {
	var notes []string
	for _, r := range m.engineRows() {
		st := m.styles.condition(r.condition())
		if r.HealthError != "" {
			notes = append(notes, st.Render(clip(r.ID+" health: "+r.HealthError, width)))
		}
		if r.LoadError != "" {
			notes = append(notes, st.Render(clip(r.ID+" load: "+r.LoadError, width)))
		}
	}
	return notes
}

func (m Model) enginesTable() *table {
	t := &table{cols: []column{
		{title: "ID"},
		{title: "MODEL", flex: true, minWidth: 10, priority: 14},
		{title: "ROLE", priority: 12},
		{title: "GROUPS", priority: 15},
		{title: "HEALTH"},
		{title: "RUN", right: true, priority: 3},
		{title: "WAIT", right: true, priority: 8},
		{title: "KV%", right: true, priority: 5},
		{title: "INFL", right: true, priority: 6},
		{title: "PICK/s", right: true, priority: 7},
		{title: "REJ/s", right: true, priority: 9},
		{title: "AGE", right: true, priority: 11},
		{title: "PREFIX", priority: 16},
		{title: "LOAD 1m", priority: 10},
	}}
	for _, r := range m.engineRows() {
		run, wait, age, scale := "-", "-", "-", 0.0
		if l := r.Load; l != nil {
			run, wait = fmt.Sprint(l.Running), fmt.Sprint(l.Waiting)
			if l.Native {
				scale = float64(l.MaxRunning)
			}
			if r.ReportAgeMS >= 0 {
				age = formatDuration(r.reportAge())
			}
		}
		kv := "-"
		if u := r.kvUsage(); u >= 0 {
			kv = fmt.Sprintf("%.0f%%", u*100)
		}
		cond := r.condition()
		t.rows = append(t.rows, row{
			cells: []string{
				r.ID, r.Model, r.Role, strings.Join(r.buckets(), ","), r.health(cond), run, wait, kv,
				fmt.Sprint(r.Inflight), formatRate(r.picks), formatRate(r.rejections), age, r.prefixCell(),
				m.snap.history[r.ID].sparkline(m.snap.at, sparkWidth, scale),
			},
			style: m.styles.condition(cond),
		})
	}
	return t
}

// prefixCell shows the engine's size in each prefix index in tokens: "ev:" for the index
// KV events feed, "sp:" for its unconfirmed speculative entries, "ap:" for the approximate
// index with its capacity, e.g. "ap:12.3k/500k".
func (e *Engine) prefixCell() string {
	var parts []string
	for _, p := range e.PrefixIndex {
		switch p.Source {
		case "local_index":
			parts = append(parts, "ev:"+formatTokens(p.Tokens))
		case "speculative":
			parts = append(parts, "sp:"+formatTokens(p.Tokens))
		case "approximate":
			cell := "ap:" + formatTokens(p.Tokens)
			if p.CapacityTokens > 0 {
				cell += "/" + formatTokens(p.CapacityTokens)
			}
			parts = append(parts, cell)
		}
	}
	return orDash(strings.Join(parts, " "))
}
