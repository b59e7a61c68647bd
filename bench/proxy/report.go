package proxy

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Cell names one measured combination.
type Cell struct {
	Kind   string
	Conc   int
	Target string
}

// Trials collects every round's result per cell; direct is the target named "direct".
type Trials map[Cell][]Result

// stat is a median with its range.
type stat struct{ med, lo, hi float64 }

func summarize(v []float64) stat {
	if len(v) == 0 {
		return stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{m, s[0], s[len(s)-1]}
}

func (t Trials) rates(c Cell) []float64 {
	var v []float64
	for _, r := range t[c] {
		v = append(v, float64(r.Requests)/r.Elapsed.Seconds())
	}
	return v
}

func (t Trials) cpu(c Cell) []float64 {
	var v []float64
	for _, r := range t[c] {
		v = append(v, float64(r.CPU)/float64(time.Microsecond)/float64(r.Requests))
	}
	return v
}

// added returns, per round, the target's latency minus direct's in the same round.
func (t Trials) added(c Cell, p99 bool) []float64 {
	d := t[Cell{c.Kind, c.Conc, "direct"}]
	var v []float64
	for i, r := range t[c] {
		if i >= len(d) {
			break
		}
		x, y := r.P50, d[i].P50
		if p99 {
			x, y = r.P99, d[i].P99
		}
		v = append(v, float64(x-y)/float64(time.Microsecond))
	}
	return v
}

// paired returns, per round, the target's value over base's in the same round. A round
// runs a cell's targets back to back, so a slow spell of a shared host weighs on both
// sides of a ratio, where a ratio of medians over rounds would compare different spells.
func paired(a, base []float64) []float64 {
	var v []float64
	for i := range min(len(a), len(base)) {
		if base[i] > 0 {
			v = append(v, a[i]/base[i])
		}
	}
	return v
}

// WriteReport prints one Markdown table: per request kind, concurrency and target, the
// median and range over rounds of req/s, added p50/p99 latency against direct and CPU per
// request, and the median and range over rounds of the ratios against the bare proxy and
// nginx in the same round.
func WriteReport(w io.Writer, t Trials, kinds, targets []string, concs []int) {
	fmt.Fprintln(w, "| kind | c | target | req/s | added p50 µs | added p99 µs | CPU µs/req | CPU ÷ bare | CPU ÷ nginx | req/s ÷ bare | req/s ÷ nginx | failed |")
	fmt.Fprintln(w, "|---|---:|---|---|---:|---:|---|---|---|---|---|---:|")
	for _, kind := range kinds {
		for _, c := range concs {
			cell := func(name string) Cell { return Cell{kind, c, name} }
			bareCPU, bareRate := t.cpu(cell("bare_proxy")), t.rates(cell("bare_proxy"))
			ngxCPU, ngxRate := t.cpu(cell("nginx")), t.rates(cell("nginx"))
			for _, name := range targets {
				k := cell(name)
				if len(t[k]) == 0 {
					continue
				}
				rates, cpus := t.rates(k), t.cpu(k)
				rate, cpu := summarize(rates), summarize(cpus)
				failed := 0
				for _, r := range t[k] {
					failed += r.Errors
				}
				fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", kind, c, name,
					rng(rate, "%.0f"), added(t, k, false), added(t, k, true), cpuStat(name, cpu),
					ratio(name, paired(cpus, bareCPU)), ratio(name, paired(cpus, ngxCPU)),
					ratio(name, paired(rates, bareRate)), ratio(name, paired(rates, ngxRate)), failed)
			}
		}
	}
}

// Pairs collects, per cell, each at-once round's results of the reference (the bare
// proxy, or a baseline router) and of the cell's target run at the same time (see AtOnce).
type Pairs map[Cell][][2]Result

// WriteAtOnce prints one Markdown table: per request kind, concurrency and target, the
// median and range over rounds of the target's CPU per request and request rate over the
// reference's (ref names it: "bare" or "baseline"), each run at the same time as the
// other.
func WriteAtOnce(w io.Writer, p Pairs, ref string, kinds, targets []string, concs []int) {
	fmt.Fprintf(w, "| kind | c | target | CPU µs/req | %[1]s CPU µs/req | CPU ÷ %[1]s | req/s ÷ %[1]s |\n", ref)
	fmt.Fprintln(w, "|---|---:|---|---|---|---|---|")
	for _, kind := range kinds {
		for _, c := range concs {
			for _, name := range targets {
				rounds := p[Cell{kind, c, name}]
				if len(rounds) == 0 {
					continue
				}
				var bare, target Trials = Trials{}, Trials{}
				k := Cell{kind, c, name}
				for _, r := range rounds {
					bare[k], target[k] = append(bare[k], r[0]), append(target[k], r[1])
				}
				cpus, bareCPU := target.cpu(k), bare.cpu(k)
				fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s |\n", kind, c, name,
					rng(summarize(cpus), "%.0f"), rng(summarize(bareCPU), "%.0f"),
					ratio(name, paired(cpus, bareCPU)), ratio(name, paired(target.rates(k), bare.rates(k))))
			}
		}
	}
}

func rng(s stat, f string) string {
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s.med, s.lo, s.hi)
}

func added(t Trials, k Cell, p99 bool) string {
	if k.Target == "direct" {
		return "–"
	}
	return fmt.Sprintf("%.0f", summarize(t.added(k, p99)).med)
}

func cpuStat(name string, s stat) string {
	if name == "direct" {
		return "–"
	}
	return rng(s, "%.0f")
}

// ratio shows the median and range of per-round ratios.
func ratio(name string, v []float64) string {
	if name == "direct" || len(v) == 0 {
		return "–"
	}
	return rng(summarize(v), "%.2f")
}
