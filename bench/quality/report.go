package quality

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Row is one policy's figures on one workload.
type Row struct {
	Workload, Policy string
	Requests, Errors int
	// TTFT and E2E are the 50th, 90th and 99th percentiles of successful requests.
	TTFT, E2E [3]time.Duration
	// RequestsPerSec and TokensPerSec are completions and output tokens over the time
	// from the first send to the last answer.
	RequestsPerSec, TokensPerSec float64
	// HitRate is the share of prompt tokens the engines reported as cached.
	HitRate float64
	// Busiest is the busiest engine's requests over the even share (1: a perfect spread).
	Busiest float64
	// Classes are the figures of each class of traffic of a mixed workload, by class name;
	// nil when the workload has one class.
	Classes map[string]ClassFigures
}

// ClassFigures are one traffic class's TTFT p90 and cache hit rate within a workload.
type ClassFigures struct {
	TTFT90  time.Duration
	HitRate float64
}

// Summarize computes a row from a run's outcomes.
func Summarize(workload, policy string, outs []Outcome) Row {
	r := Row{Workload: workload, Policy: policy, Requests: len(outs)}
	var ttft, e2e []time.Duration
	var prompt, cached, tokens int
	var first, last time.Duration = -1, 0
	for _, o := range outs {
		if o.Err != nil {
			r.Errors++
			continue
		}
		ttft, e2e = append(ttft, o.TTFT), append(e2e, o.E2E)
		prompt, cached, tokens = prompt+o.PromptTokens, cached+o.CachedTokens, tokens+o.OutputTokens
		if first < 0 || o.Sent < first {
			first = o.Sent
		}
		last = max(last, o.Sent+o.E2E)
	}
	r.TTFT, r.E2E = percentiles(ttft), percentiles(e2e)
	if span := (last - first).Seconds(); first >= 0 && span > 0 {
		r.RequestsPerSec, r.TokensPerSec = float64(len(ttft))/span, float64(tokens)/span
	}
	if prompt > 0 {
		r.HitRate = float64(cached) / float64(prompt)
	}
	r.Classes = byClass(outs)
	return r
}

// byClass summarizes each class of a workload of more than one.
func byClass(outs []Outcome) map[string]ClassFigures {
	groups := map[string][]Outcome{}
	for _, o := range outs {
		groups[o.Class] = append(groups[o.Class], o)
	}
	if len(groups) < 2 {
		return nil
	}
	m := map[string]ClassFigures{}
	for c, g := range groups {
		var ttft []time.Duration
		var prompt, cached int
		for _, o := range g {
			if o.Err == nil {
				ttft, prompt, cached = append(ttft, o.TTFT), prompt+o.PromptTokens, cached+o.CachedTokens
			}
		}
		f := ClassFigures{TTFT90: percentiles(ttft)[1]}
		if prompt > 0 {
			f.HitRate = float64(cached) / float64(prompt)
		}
		m[c] = f
	}
	return m
}

// WriteClassTable writes, for the rows of mixed workloads, TTFT p90 and cache hit rate of
// each class of traffic: what one class's routing does to another's cache.
func WriteClassTable(w io.Writer, rows []Row) error {
	var classes []string
	for _, r := range rows {
		for c := range r.Classes {
			if !slices.Contains(classes, c) {
				classes = append(classes, c)
			}
		}
	}
	if len(classes) == 0 {
		return nil
	}
	slices.Sort(classes)
	head, rule := "| workload | policy |", "|---|---|"
	for _, c := range classes {
		head, rule = head+" "+c+" TTFT p90 | hit |", rule+"---:|---:|"
	}
	if _, err := fmt.Fprintf(w, "%s\n%s\n", head, rule); err != nil {
		return err
	}
	for _, r := range rows {
		if r.Classes == nil {
			continue
		}
		line := "| " + r.Workload + " | " + r.Policy + " |"
		for _, c := range classes {
			f := r.Classes[c]
			line += fmt.Sprintf(" %s | %.0f%% |", ms(f.TTFT90), 100*f.HitRate)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// percentiles returns the nearest-rank p50, p90 and p99 of ds (zero when empty).
func percentiles(ds []time.Duration) [3]time.Duration {
	var p [3]time.Duration
	if len(ds) == 0 {
		return p
	}
	slices.Sort(ds)
	for i, q := range []float64{0.50, 0.90, 0.99} {
		k := int(q*float64(len(ds))+0.999999) - 1
		p[i] = ds[max(0, min(k, len(ds)-1))]
	}
	return p
}

// WriteTable writes rows as a Markdown table, milliseconds of wall-clock time.
func WriteTable(w io.Writer, rows []Row) error {
	if _, err := fmt.Fprintln(w, "| workload | policy | ok/sent | TTFT p50 | p90 | p99 | E2E p50 | p99 | req/s | tok/s | cache hit | busiest |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"); err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "| %s | %s | %d/%d | %s | %s | %s | %s | %s | %.1f | %.0f | %.0f%% | %.2f |\n",
			r.Workload, r.Policy, r.Requests-r.Errors, r.Requests,
			ms(r.TTFT[0]), ms(r.TTFT[1]), ms(r.TTFT[2]), ms(r.E2E[0]), ms(r.E2E[2]),
			r.RequestsPerSec, r.TokensPerSec, 100*r.HitRate, r.Busiest); err != nil {
			return err
		}
	}
	return nil
}

// ms formats a duration in whole milliseconds, with one decimal below 10 ms.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
