package quality

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// SLOWorkload is the name of the SLO workload: tight-TTFT and relaxed requests over a
// bucket of fast engines and a bucket of slow ones, whose share of tight requests meeting
// their target is measured under each SLO preference.
const SLOWorkload = "slo"

// SLOPreferences are the TTFT preferences the SLO workload compares.
var SLOPreferences = []string{plan.SLODisabled, plan.SLOFirst, plan.SLOBestEffort}

// slowFactor is how much slower the slow engines prefill: their per-token and per-batch
// costs are this multiple of the fast engines'.
const slowFactor = 8

// SLORow is one preference's figures on the SLO workload.
type SLORow struct {
	Preference string
	// Tight and Relaxed count the requests of each class; Errors the failed ones.
	Tight, Relaxed, Errors int
	// TightMet is the share of tight requests whose TTFT was at or below their target.
	TightMet float64
	// TTFT90 is the TTFT p90 of each class.
	TightTTFT90, RelaxedTTFT90 time.Duration
	// FastShare is the share of all requests the fast engines served.
	FastShare float64
	// TargetMS is the tight requests' target, in wall-clock ms.
	TargetMS float64
}

// sloPlan is the SLO workload's fleet: half the engines fast, half slow (at least one
// each), its bucket estimates and the tight target, all in wall-clock ms at the time scale.
type sloPlan struct {
	fast, slow     int
	fastCfg        sim.Config
	slowCfg        sim.Config
	promptWords    int
	fastMS, slowMS float64 // nominal TTFT of one prompt alone
}

func newSLOPlan(o Options) sloPlan {
	p := sloPlan{fast: max(o.Engines/2, 1), slow: max(o.Engines-o.Engines/2, 1), promptWords: o.Shape.DocumentWords / 2}
	p.fastCfg = EngineConfig(o.TimeScale)
	p.slowCfg = p.fastCfg
	p.slowCfg.PrefillOverhead *= slowFactor
	p.slowCfg.PrefillPerToken *= slowFactor
	nominal := func(c sim.Config) float64 {
		d := c.PrefillOverhead + time.Duration(p.promptWords)*c.PrefillPerToken
		return float64(d) * max(c.TimeScale, 1e-3) / float64(time.Millisecond)
	}
	p.fastMS, p.slowMS = nominal(p.fastCfg), nominal(p.slowCfg)
	return p
}

// targetMS is the tight requests' TTFT target: three times a fast engine's nominal TTFT,
// which a slow engine (eight times slower) cannot meet.
func (p sloPlan) targetMS() float64 { return 3 * p.fastMS }

// config is the router config: the slow bucket first in the design's order (its input
// capacity is smaller), each bucket estimated at twice its engines' nominal TTFT.
func (p sloPlan) config(pref string) []byte {
	var b strings.Builder
	b.WriteString("engines:\n")
	for i := range p.fast {
		fmt.Fprintf(&b, "  - {id: F%d, url: \"http://127.0.0.1:%d\", model: m, role: plain}\n", i+1, i+1)
	}
	for i := range p.slow {
		fmt.Fprintf(&b, "  - {id: S%d, url: \"http://127.0.0.1:%d\", model: m, role: plain}\n", i+1, 100+i+1)
	}
	fmt.Fprintf(&b, "models:\n  m:\n    slo: {ttft: %s}\n    buckets:\n", pref)
	fmt.Fprintf(&b, "      - {id: slow, limits: {max: 8192}, estimates: {ttft_ms: %.3f}, groups: {plain: {worker_ids: [%s], policy: {type: power_of_two}}}}\n",
		2*p.slowMS, ids("S", p.slow))
	fmt.Fprintf(&b, "      - {id: fast, estimates: {ttft_ms: %.3f}, groups: {plain: {worker_ids: [%s], policy: {type: power_of_two}}}}\n",
		2*p.fastMS, ids("F", p.fast))
	return []byte(b.String())
}

func ids(prefix string, n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return strings.Join(out, ", ")
}

// requests are the workload: prompts that share nothing (no cache effect), alternately
// tight (with the target) and relaxed (without), at a rate that keeps the slow engines
// alone busy for the utilisation's share of the time.
func (p sloPlan) requests(o Options) ([]Request, float64) {
	g := newGen(o.Shape, o.Seed)
	reqs := make([]Request, o.Shape.Requests)
	for i := range reqs {
		reqs[i] = Request{Messages: []Message{{Role: "user", Content: g.text(p.promptWords)}},
			MaxTokens: o.Shape.OutputTokens, Class: "relaxed", PromptWords: p.promptWords}
		if i%2 == 0 {
			reqs[i].Class, reqs[i].TTFTSLOMS = "tight", p.targetMS()
		}
	}
	rate := Rate(reqs, p.slowCfg, p.slow, o.Utilisation)
	Schedule(reqs, rate, o.Seed)
	return reqs, rate
}

// RunSLO runs the SLO workload once per preference, each on a fresh fleet.
func RunSLO(ctx context.Context, o Options) ([]SLORow, error) {
	p := newSLOPlan(o)
	client := newClient()
	defer client.CloseIdleConnections()
	base, rate := p.requests(o)
	cfgOf := func(id string) sim.Config {
		if strings.HasPrefix(id, "S") {
			return p.slowCfg
		}
		return p.fastCfg
	}
	var rows []SLORow
	for _, pref := range SLOPreferences {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		f, err := startFleet(ctx, "slo/"+pref, p.config(pref), 1, cfgOf)
		if err != nil {
			return rows, err
		}
		start := time.Now()
		outs := Send(ctx, client, f.URL, append([]Request(nil), base...))
		counts, err := f.EngineRequests()
		client.CloseIdleConnections()
		f.Close()
		if err != nil {
			return rows, err
		}
		row := summarizeSLO(pref, outs, counts[:p.fast], counts)
		row.TargetMS = p.targetMS()
		rows = append(rows, row)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%-16s %-24s %5.1f req/s offered, %3d errors, tight met %.0f%%, fast share %.2f, %s\n",
				SLOWorkload, pref, rate, row.Errors, 100*row.TightMet, row.FastShare, time.Since(start).Round(100*time.Millisecond))
		}
	}
	return rows, nil
}

// summarizeSLO computes a preference's row; fast are the fast engines' request counts,
// all every engine's.
func summarizeSLO(pref string, outs []Outcome, fast, all []int) SLORow {
	r := SLORow{Preference: pref}
	var tight, relaxed []time.Duration
	met := 0
	for _, o := range outs {
		if o.Err != nil {
			r.Errors++
			continue
		}
		if o.TTFTSLOMS > 0 {
			tight = append(tight, o.TTFT)
			if float64(o.TTFT)/float64(time.Millisecond) <= o.TTFTSLOMS {
				met++
			}
		} else {
			relaxed = append(relaxed, o.TTFT)
		}
	}
	r.Tight, r.Relaxed = len(tight), len(relaxed)
	if len(tight) > 0 {
		r.TightMet = float64(met) / float64(len(tight))
	}
	r.TightTTFT90, r.RelaxedTTFT90 = percentiles(tight)[1], percentiles(relaxed)[1]
	if n := sum(all); n > 0 {
		r.FastShare = float64(sum(fast)) / float64(n)
	}
	return r
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// WriteSLOTable writes the SLO workload's rows as a Markdown table.
func WriteSLOTable(w io.Writer, rows []SLORow) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "SLO workload: tight requests carry x-sgl-ttft-slo-ms %s ms; the fast bucket's engines prefill %dx faster than the slow bucket's, which comes first in the design's order.\n\n"+
		"| slo.ttft | tight met | tight TTFT p90 ms | relaxed TTFT p90 ms | fast engines' share | errors |\n|---|---|---|---|---|---|\n",
		ms(time.Duration(rows[0].TargetMS*float64(time.Millisecond))), slowFactor)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "| %s | %.0f%% of %d | %s | %s | %.2f | %d |\n",
			r.Preference, 100*r.TightMet, r.Tight, ms(r.TightTTFT90), ms(r.RelaxedTTFT90), r.FastShare, r.Errors); err != nil {
			return err
		}
	}
	return nil
}
