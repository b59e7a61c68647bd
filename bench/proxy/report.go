package proxy

import (
	"fmt"
	"io"
	"slices"
	"strings"
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
		v = append(v, cpuPerRequest(r))
	}
	return v
}

// cpuPerRequest is a trial's CPU per request in µs.
func cpuPerRequest(r Result) float64 {
	return float64(r.CPU) / float64(time.Microsecond) / float64(r.Requests)
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

// cpuRatios returns, per round, cell k's CPU per request over the target ref's in the
// same round of the same kind and concurrency.
func (t Trials) cpuRatios(k Cell, ref string) []float64 {
	return paired(t.cpu(k), t.cpu(Cell{k.Kind, k.Conc, ref}))
}

// WriteHarnesses prints one Markdown table that sets the two harnesses side by side: per
// request kind, concurrency and proxy, the median CPU per request measured with our
// client (ours) and with wrk, back to back, and the paired ratios against the bare proxy
// and nginx that each measured; oursOnce and wrkOnce add each harness's ratio against the
// bare proxy in at-once rounds (nil leaves them out).
func WriteHarnesses(w io.Writer, ours, wrk Trials, oursOnce, wrkOnce Pairs, kinds, targets []string, concs []int) {
	fmt.Fprintln(w, "| kind | c | target | CPU µs/req, ours | CPU µs/req, wrk | CPU ÷ bare, ours | CPU ÷ bare, wrk | CPU ÷ bare at once, ours | CPU ÷ bare at once, wrk | CPU ÷ nginx, ours | CPU ÷ nginx, wrk |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, kind := range kinds {
		for _, c := range concs {
			for _, name := range targets {
				k := Cell{kind, c, name}
				if name == "direct" || len(ours[k])+len(wrk[k]) == 0 {
					continue
				}
				fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", kind, c, name,
					median(ours.cpu(k), "%.0f"), median(wrk.cpu(k), "%.0f"),
					median(ours.cpuRatios(k, "bare_proxy"), "%.2f"), median(wrk.cpuRatios(k, "bare_proxy"), "%.2f"),
					median(oursOnce.cpuRatios(k), "%.2f"), median(wrkOnce.cpuRatios(k), "%.2f"),
					median(ours.cpuRatios(k, "nginx"), "%.2f"), median(wrk.cpuRatios(k, "nginx"), "%.2f"))
			}
		}
	}
}

// cpuRatios returns, per at-once round of cell k, the target's CPU per request over the
// reference's.
func (p Pairs) cpuRatios(k Cell) []float64 {
	var v []float64
	for _, r := range p[k] {
		if ref := cpuPerRequest(r[0]); ref > 0 {
			v = append(v, cpuPerRequest(r[1])/ref)
		}
	}
	return v
}

// WriteNginxLine prints the run's summary line: each router's CPU per request over
// nginx's at conc clients, the median of paired rounds for each kind, with our client
// and with wrk, against goal; the worst of them decides whether the goal is met.
func WriteNginxLine(w io.Writer, ours, wrk Trials, kinds, routers []string, conc int, goal float64) {
	fmt.Fprintf(w, "router ÷ nginx CPU per request at %d clients (goal ≤ %.1f):", conc, goal)
	worst, n := 0.0, 0
	for _, kind := range kinds {
		fmt.Fprintf(w, " %s:", kind)
		for _, name := range routers {
			k := Cell{kind, conc, name}
			fmt.Fprintf(w, " %s %s (wrk %s)", strings.TrimPrefix(name, "router/"), median(ours.cpuRatios(k, "nginx"), "%.2f"), median(wrk.cpuRatios(k, "nginx"), "%.2f"))
			for _, v := range [][]float64{ours.cpuRatios(k, "nginx"), wrk.cpuRatios(k, "nginx")} {
				if len(v) > 0 {
					worst, n = max(worst, summarize(v).med), n+1
				}
			}
		}
		fmt.Fprint(w, ";")
	}
	switch {
	case n == 0:
		fmt.Fprintln(w, " not measured (no nginx, or no such concurrency)")
	case worst <= goal:
		fmt.Fprintf(w, " worst %.2f: met\n", worst)
	default:
		fmt.Fprintf(w, " worst %.2f: not met\n", worst)
	}
}

// WriteResources prints one Markdown table of each target's resident memory (see Memory)
// and its CPU while idle, as a share of a core (see IdleCPU).
func WriteResources(w io.Writer, mem map[string]Memory, idle map[string]float64, targets []string) {
	fmt.Fprintln(w, "| target | VmRSS MB | VmHWM MB | idle CPU % of a core |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, name := range targets {
		if m, ok := mem[name]; ok {
			fmt.Fprintf(w, "| %s | %.1f | %.1f | %.2f |\n", name, float64(m.RSS)/(1<<20), float64(m.HWM)/(1<<20), 100*idle[name])
		}
	}
}

// median shows the median of v, or a dash when there is none.
func median(v []float64, f string) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf(f, summarize(v).med)
}
