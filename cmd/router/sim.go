package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

func simCommand() *cli.Command {
	def := sim.DefaultConfig()
	return &cli.Command{
		Name:      "sim",
		Usage:     "run simulated SGLang-compatible engines for demos, tests and benchmarks",
		ArgsUsage: "[FILE...]",
		Description: `Starts simulated engines on 127.0.0.1, prints a table of them and serves until
SIGINT or SIGTERM. With --config, one engine per engine of the router config, at
the port of its URL, with its kind, model, role, bootstrap port, DP size and KV event
publisher (in kv_events.mode bind, the publisher dials the router's endpoint). With --engines, N engines of one role on consecutive ports from --port
(0 picks free ports). The model flags apply to every engine; docs/simulator.md
describes the endpoints, the model and the faults.`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "simulate the engines of router config `FILE` (repeatable; more files may follow as arguments)"},
			&cli.IntFlag{Name: "engines", Aliases: []string{"n"}, Usage: "start `N` engines of one role (instead of --config)"},
			&cli.StringFlag{Name: "role", Value: string(plan.RolePlain), Usage: "role of the --engines engines: plain, prefill or decode"},
			&cli.StringFlag{Name: "kind", Value: string(plan.KindSGLang), Usage: "engine software the --engines engines imitate: sglang or vllm"},
			&cli.IntFlag{Name: "port", Usage: "HTTP port of the first --engines engine; the others follow"},
			&cli.StringFlag{Name: "model", Value: "sim", Usage: "model name the --engines engines serve"},
			&cli.IntFlag{Name: "dp-size", Value: 1, Usage: "data-parallel ranks per --engines engine"},
			&cli.IntFlag{Name: "bootstrap-port", Value: 8998, Usage: "bootstrap port of the first prefill --engines engine; the others follow"},
			&cli.BoolFlag{Name: "kv-events", Usage: "publish KV events over ZMQ from the --engines engines"},
			&cli.IntFlag{Name: "kv-port", Usage: "ZMQ port of the first engine's rank 0 (each rank takes the next port); 0 picks free ports"},
			&cli.StringFlag{Name: "faults", Usage: "faults of every engine at start, as the JSON of PUT /sim/faults"},

			&cli.Float64Flag{Name: "time-scale", Value: def.TimeScale, Category: "model", Usage: "wall-clock time per simulated second (0.01 is 100x faster, 0 does not sleep)"},
			&cli.IntFlag{Name: "max-running", Value: def.MaxRunningRequests, Category: "model", Usage: "requests in the continuous batch; more wait"},
			&cli.IntFlag{Name: "max-prefill-tokens", Value: def.MaxPrefillTokens, Category: "model", Usage: "uncached input tokens per prefill batch"},
			&cli.IntFlag{Name: "kv-tokens", Value: def.KVCapacityTokens, Category: "model", Usage: "KV cache capacity in tokens per rank"},
			&cli.IntFlag{Name: "context-length", Value: def.ContextLength, Category: "model", Usage: "maximum input plus output tokens"},
			&cli.IntFlag{Name: "block-size", Value: def.BlockSize, Category: "model", Usage: "page size in tokens (a config's kv_events.block_size wins)"},
			&cli.IntFlag{Name: "output-tokens", Value: def.OutputTokens, Category: "model", Usage: "tokens generated when max_tokens allows"},
			&cli.DurationFlag{Name: "prefill-overhead", Value: def.PrefillOverhead, Category: "model", Usage: "fixed time of a prefill batch"},
			&cli.DurationFlag{Name: "prefill-per-token", Value: def.PrefillPerToken, Category: "model", Usage: "prefill time per uncached input token"},
			&cli.DurationFlag{Name: "decode-per-token", Value: def.DecodePerToken, Category: "model", Usage: "decode step time with one running request"},
			&cli.Float64Flag{Name: "decode-batch-factor", Value: def.DecodeBatchFactor, Category: "model", Usage: "decode slowdown per additional running request"},
			&cli.DurationFlag{Name: "transfer-per-token", Value: def.TransferPerToken, Category: "model", Usage: "decode-side KV transfer time per input token"},
			&cli.DurationFlag{Name: "bootstrap-timeout", Value: def.BootstrapTimeout, Category: "model", Usage: "how long a decode engine waits for its local prefill peer"},
		},
		Action: runSim,
	}
}

func runSim(c *cli.Context) error {
	files := append(c.StringSlice("config"), c.Args().Slice()...)
	n := c.Int("engines")
	switch {
	case len(files) > 0 && c.IsSet("engines"):
		return usageError("sim takes either --config FILE... or --engines N, not both")
	case len(files) == 0 && !c.IsSet("engines"):
		return usageError("sim needs --config FILE... or --engines N")
	case c.IsSet("engines") && n < 1:
		return usageError("--engines must be at least 1, got %d", n)
	}
	cfg := simConfig(c)
	var faults sim.Faults
	if s := c.String("faults"); s != "" {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&faults); err != nil {
			return usageError("--faults: %v", err)
		}
		if err := faults.Validate(); err != nil {
			return usageError("--faults: %v", err)
		}
	}

	var specs []sim.EngineSpec
	if len(files) > 0 {
		p, err := compiler.Compile(files)
		if err != nil {
			return err
		}
		if specs, err = sim.SpecsFromPlan(p, cfg); err != nil {
			return err
		}
	} else {
		var err error
		if specs, err = engineSpecs(c, n, cfg); err != nil {
			return err
		}
	}
	for i := range specs {
		specs[i].Faults = faults
	}

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fleet, err := sim.Start(ctx, specs)
	if err != nil {
		return err
	}
	printFleet(c.App.Writer, fleet)
	<-ctx.Done()
	if err := fleet.Close(); err != nil {
		return fmt.Errorf("stopping simulated engines: %w", err)
	}
	fmt.Fprintf(c.App.ErrWriter, "router sim: stopped %d engines\n", len(fleet.Engines()))
	return nil
}

// simConfig reads the model flags; sim.Start validates the result.
func simConfig(c *cli.Context) sim.Config {
	return sim.Config{
		MaxRunningRequests: c.Int("max-running"),
		MaxPrefillTokens:   c.Int("max-prefill-tokens"),
		KVCapacityTokens:   c.Int("kv-tokens"),
		ContextLength:      c.Int("context-length"),
		BlockSize:          c.Int("block-size"),
		OutputTokens:       c.Int("output-tokens"),
		PrefillOverhead:    c.Duration("prefill-overhead"),
		PrefillPerToken:    c.Duration("prefill-per-token"),
		DecodePerToken:     c.Duration("decode-per-token"),
		DecodeBatchFactor:  c.Float64("decode-batch-factor"),
		TransferPerToken:   c.Duration("transfer-per-token"),
		TimeScale:          c.Float64("time-scale"),
		BootstrapTimeout:   c.Duration("bootstrap-timeout"),
	}
}

// engineSpecs builds the --engines fleet: ids E1.. (plain), P1.. (prefill) or D1..
// (decode) on consecutive ports.
func engineSpecs(c *cli.Context, n int, cfg sim.Config) ([]sim.EngineSpec, error) {
	role := plan.Role(c.String("role"))
	prefix := map[plan.Role]string{plan.RolePlain: "E", plan.RolePrefill: "P", plan.RoleDecode: "D"}[role]
	if prefix == "" {
		return nil, usageError("--role must be plain, prefill or decode, not %q", role)
	}
	kind := plan.Kind(c.String("kind"))
	if kind != plan.KindSGLang && kind != plan.KindVLLM {
		return nil, usageError("--kind must be sglang or vllm, not %q", kind)
	}
	port, dp, kvPort := c.Int("port"), c.Int("dp-size"), c.Int("kv-port")
	specs := make([]sim.EngineSpec, n)
	for i := range specs {
		s := sim.EngineSpec{
			ID: prefix + strconv.Itoa(i+1), Model: c.String("model"), Kind: kind, Role: role, DPSize: dp, Config: cfg,
			Addr: "127.0.0.1:" + strconv.Itoa(offset(port, i)),
		}
		if role == plan.RolePrefill {
			s.BootstrapPort = c.Int("bootstrap-port") + i
		}
		if c.Bool("kv-events") {
			s.KVEvents = &sim.KVEventsSpec{Endpoint: "tcp://127.0.0.1:" + strconv.Itoa(offset(kvPort, i*dp))}
		}
		specs[i] = s
	}
	return specs, nil
}

// offset is base+i, except that base 0 ("any free port") stays 0.
func offset(base, i int) int {
	if base == 0 {
		return 0
	}
	return base + i
}

// printFleet writes one line per engine: where it serves and where it publishes.
func printFleet(w io.Writer, f *sim.Fleet) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tROLE\tMODEL\tURL\tDP\tBOOTSTRAP\tKV EVENTS")
	for _, e := range f.Engines() {
		bootstrap, kv := "-", "-"
		if e.Role() == plan.RolePrefill {
			bootstrap = strconv.Itoa(e.BootstrapPort())
		}
		if eps := e.KVEndpoints(); eps != nil {
			kv = strings.Join(eps, ",") + " topic=" + e.KVTopic() + " " + e.KVEncoding()
			if e.KVDials() {
				kv = "dials " + kv
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID(), e.Kind(), e.Role(), e.Model(), e.URL(), e.DPSize(), bootstrap, kv)
	}
	tw.Flush()
}
