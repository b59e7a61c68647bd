package quality

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/routerkit/router/runtime/sim"
)

// Options configure a benchmark run.
type Options struct {
	Workloads []string
	Policies  []Policy
	Engines   int
	Shape     Shape
	// Utilisation is the target load: the arrival rate at which the fleet would be this
	// busy if no prompt were ever cached (see Rate).
	Utilisation float64
	TimeScale   float64
	Seed        uint64
	// Progress, when set, gets one line per finished run.
	Progress io.Writer
}

// Rate returns the arrival rate (requests per second of wall-clock time) that keeps n
// engines busy for a fraction u of the time when nothing is cached: each request costs its
// uncached prefill plus its share of decode steps in a batch of four.
func Rate(reqs []Request, cfg sim.Config, n int, u float64) float64 {
	var words int
	for _, r := range reqs {
		words += r.PromptWords
	}
	mean := float64(words) / float64(len(reqs))
	out := float64(reqs[0].MaxTokens)
	const batch = 4
	step := float64(cfg.DecodePerToken) * (1 + cfg.DecodeBatchFactor*(batch-1)) / batch
	cost := float64(cfg.PrefillOverhead) + mean*float64(cfg.PrefillPerToken) + out*step
	cost *= max(cfg.TimeScale, 1e-3)
	return u * float64(n) / (cost / float64(time.Second))
}

// Run measures every policy on every workload, each on a fresh fleet (empty caches),
// and returns the rows in workload, then policy order.
func Run(ctx context.Context, o Options) ([]Row, error) {
	cfg := EngineConfig(o.TimeScale)
	client := newClient()
	defer client.CloseIdleConnections()
	var rows []Row
	for wi, wl := range o.Workloads {
		seed := o.Seed + uint64(wi)
		base, err := Generate(wl, o.Shape, seed)
		if err != nil {
			return nil, err
		}
		rate := Rate(base, cfg, o.Engines, o.Utilisation)
		Schedule(base, rate, seed)
		for _, pol := range o.Policies {
			if err := ctx.Err(); err != nil {
				return rows, err
			}
			reqs := append([]Request(nil), base...)
			f, err := StartFleet(ctx, pol, o.Engines, cfg)
			if err != nil {
				return rows, err
			}
			start := time.Now()
			outs := Send(ctx, client, f.URL, reqs)
			counts, err := f.EngineRequests()
			// Idle keep-alive connections would hold the router's graceful shutdown.
			client.CloseIdleConnections()
			f.Close()
			if err != nil {
				return rows, err
			}
			row := Summarize(wl, pol.Name, outs)
			row.Busiest = busiestShare(counts)
			rows = append(rows, row)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "%-16s %-24s %5.1f req/s offered, %3d errors, TTFT p90 %s ms, hit %.0f%%, busiest %.2f %v, %s\n",
					wl, pol.Name, rate, row.Errors, ms(row.TTFT[1]), 100*row.HitRate, row.Busiest, counts, time.Since(start).Round(100*time.Millisecond))
			}
		}
	}
	return rows, nil
}
