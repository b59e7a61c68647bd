// Command quality runs the routing-quality benchmark (bench/quality) and writes its table
// and TTFT plot. `make bench-quality` runs it; -short is a quick smoke run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/routerkit/router/bench/quality"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-quality:", err)
		os.Exit(1)
	}
}

func run() error {
	o := quality.Options{Shape: quality.DefaultShape()}
	workloads := flag.String("workloads", strings.Join(append(quality.Workloads, quality.ReplicasWorkload, quality.SLOWorkload, quality.OverloadWorkload), ","), "comma-separated workloads")
	policies := flag.String("policies", "", "comma-separated policies (default: all)")
	flag.IntVar(&o.Engines, "engines", 4, "simulated engines")
	flag.Float64Var(&o.Utilisation, "util", 0.7, "target utilisation without cache hits")
	flag.Float64Var(&o.TimeScale, "time-scale", 0.5, "simulator time scale (1 is real time)")
	flag.Uint64Var(&o.Seed, "seed", 1, "workload seed")
	flag.IntVar(&o.Shape.Requests, "requests", o.Shape.Requests, "requests per workload")
	short := flag.Bool("short", false, "a quick smoke run: few requests, fast time scale")
	out := flag.String("out", "bench-quality", "directory for results.md and ttft.svg")
	flag.Parse()
	if *short {
		o.Shape.Requests, o.Shape.Conversations, o.TimeScale = 24, 4, 0.05
	}
	runSLO, runReplicas, runOverload := false, false, false
	for _, w := range strings.Split(*workloads, ",") {
		switch w {
		case quality.SLOWorkload:
			runSLO = true
		case quality.ReplicasWorkload:
			runReplicas = true
		case quality.OverloadWorkload:
			runOverload = true
		default:
			o.Workloads = append(o.Workloads, w)
		}
	}
	if *policies == "" {
		o.Policies = quality.Policies
	} else {
		for _, name := range strings.Split(*policies, ",") {
			p, ok := quality.FindPolicy(name)
			if !ok {
				return fmt.Errorf("unknown policy %q", name)
			}
			o.Policies = append(o.Policies, p)
		}
	}
	o.Progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rows, err := quality.Run(ctx, o)
	if err != nil {
		return err
	}
	if runReplicas {
		more, err := quality.RunReplicas(ctx, o)
		if err != nil {
			return err
		}
		rows = append(rows, more...)
	}
	var sloRows []quality.SLORow
	if runSLO {
		if sloRows, err = quality.RunSLO(ctx, o); err != nil {
			return err
		}
	}
	var overloadRows []quality.OverloadRow
	if runOverload {
		if overloadRows, err = quality.RunOverload(ctx, o); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%d engines, utilisation %.2f, time scale %g, seed %d, %d requests per workload\n\n",
		o.Engines, o.Utilisation, o.TimeScale, o.Seed, o.Shape.Requests)
	if len(rows) > 0 {
		if err := quality.WriteTable(&table, rows); err != nil {
			return err
		}
		table.WriteString("\nBy class of traffic within mixed workloads:\n\n")
		if err := quality.WriteClassTable(&table, rows); err != nil {
			return err
		}
		table.WriteString("\n")
	}
	if err := quality.WriteSLOTable(&table, sloRows); err != nil {
		return err
	}
	if len(sloRows) > 0 && len(overloadRows) > 0 {
		table.WriteString("\n")
	}
	if err := quality.WriteOverloadTable(&table, overloadRows); err != nil {
		return err
	}
	fmt.Print(table.String())
	if err := os.WriteFile(filepath.Join(*out, "results.md"), []byte(table.String()), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if len(rows) == 0 {
		return nil // the plot is of the policy workloads' TTFT
	}
	f, err := os.Create(filepath.Join(*out, "ttft.svg"))
	if err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	if err := quality.WriteSVG(f, rows); err != nil {
		f.Close()
		return fmt.Errorf("write plot: %w", err)
	}
	return f.Close()
}
