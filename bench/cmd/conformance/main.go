// Command conformance runs the router against llm-d-inference-sim (bench/conformance) and
// prints its checks and routing-quality figures as Markdown; it exits non-zero when a
// check fails. `make conformance` builds the simulator and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/routerkit/router/bench/conformance"
)

func main() {
	var o conformance.Options
	flag.StringVar(&o.Router, "router", "bin/router", "router binary")
	flag.StringVar(&o.Sim, "sim", "", "llm-d-inference-sim binary (make conformance builds v0.10.2)")
	flag.IntVar(&o.Requests, "requests", 240, "requests of the routing-quality run, per policy")
	flag.IntVar(&o.Documents, "documents", 8, "shared 1536-token prefixes of the routing-quality run")
	flag.IntVar(&o.Concurrency, "concurrency", 4, "clients at once in the routing-quality run")
	flag.Uint64Var(&o.Seed, "seed", 1, "seed of the routing-quality workload")
	flag.Parse()
	if o.Sim == "" {
		fmt.Fprintln(os.Stderr, "conformance: -sim names no simulator binary; run `make conformance`, which builds one")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "router-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(1)
	}
	o.Dir = dir
	res, err := conformance.Run(context.Background(), o)
	conformance.Report(os.Stdout, res)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: %v (configs and logs in %s)\n", err, dir)
		os.Exit(1)
	}
	if res.Failed() > 0 {
		fmt.Fprintf(os.Stderr, "conformance: %d checks failed (configs and logs in %s)\n", res.Failed(), dir)
		os.Exit(1)
	}
	os.RemoveAll(dir)
}
