// Command proxy runs the side-by-side proxy overhead benchmark (bench/proxy): direct to
// the engines, a bare httputil.ReverseProxy, the router with several policies and nginx
// when installed, against simulated engines that do not sleep. `make bench-proxy` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/routerkit/router/bench/proxy"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-proxy:", err)
		os.Exit(1)
	}
}

func run() error {
	bare := flag.String("serve-bare", "", "internal: serve the bare proxy on `ADDR`")
	upstreams := flag.String("upstreams", "", "internal: the bare proxy's engines")
	routerBin := flag.String("router", "bin/router", "router binary")
	policies := flag.String("policies", "round_robin,power_of_two,cache_aware", "router policies")
	rounds := flag.Int("rounds", 5, "rounds; each runs every target once per cell, in rotated order")
	n := flag.Int("requests", 3000, "requests per trial")
	concs := flag.String("concurrency", "1,8,64", "client concurrency levels")
	engines := flag.Int("engines", 4, "simulated engines")
	noNginx := flag.Bool("no-nginx", false, "leave nginx out even when installed")
	flag.Parse()
	if *bare != "" {
		ln, err := net.Listen("tcp", *bare)
		if err != nil {
			return err
		}
		return proxy.ServeBare(ln, strings.Split(*upstreams, ","))
	}
	var cs []int
	for _, s := range strings.Split(*concs, ",") {
		var c int
		if _, err := fmt.Sscan(s, &c); err != nil || c <= 0 {
			return fmt.Errorf("bad concurrency %q", s)
		}
		cs = append(cs, c)
	}

	// Engines in this process, at time scale 0: they answer as fast as they can.
	cfg := sim.DefaultConfig()
	cfg.TimeScale = 0
	var specs []sim.EngineSpec
	for i := range *engines {
		specs = append(specs, sim.EngineSpec{ID: fmt.Sprintf("E%d", i+1), Model: "m", Kind: plan.KindSGLang, Role: plan.RolePlain,
			Config: cfg, KVEvents: &sim.KVEventsSpec{Endpoint: "tcp://127.0.0.1:0"}})
	}
	fleet, err := sim.Start(context.Background(), specs)
	if err != nil {
		return err
	}
	defer fleet.Close()
	var urls, kvs []string
	for _, e := range fleet.Engines() {
		urls, kvs = append(urls, e.URL()), append(kvs, e.KVEndpoints()[0])
	}

	dir, err := os.MkdirTemp("", "bench-proxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	targets := []*proxy.Target{{Name: "direct", URL: urls[0]}}
	defer func() {
		for _, t := range targets {
			t.Stop()
		}
	}()
	t, err := proxy.StartBare(self, urls)
	if err != nil {
		return err
	}
	targets = append(targets, t)
	for _, p := range strings.Split(*policies, ",") {
		t, err := proxy.StartRouter(*routerBin, dir, p, urls, kvs)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	if !*noNginx {
		t, err := proxy.StartNginx(dir, urls)
		if err != nil {
			return err
		}
		if t != nil {
			targets = append(targets, t)
		} else {
			fmt.Fprintln(os.Stderr, "nginx not installed: left out")
		}
	}
	var names []string
	for _, t := range targets {
		names = append(names, t.Name)
	}
	// One client for all; direct uses one engine, as a proxy's upstream pool would
	// spread over all of them (the engines do not sleep, so one is never the bottleneck
	// of a single client process).
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256}, Timeout: time.Minute}
	for _, t := range targets { // warm up connections and caches
		for _, stream := range []bool{false, true} {
			if _, err := proxy.Trial(client, t.URL, stream, 8, 200, 30*time.Second, 0); err != nil {
				return fmt.Errorf("warm-up of %s: %w", t.Name, err)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(os.Stderr, "%d targets, %d rounds, %d requests per trial, GOMAXPROCS %d, load %s", len(targets), *rounds, *n, runtime.GOMAXPROCS(0), load)
	trials := proxy.Trials{}
	for r := range *rounds {
		for _, stream := range []bool{false, true} {
			for _, c := range cs {
				for i := range targets {
					t := targets[(i+r)%len(targets)]
					res, err := proxy.Trial(client, t.URL, stream, c, *n, 20*time.Second, t.PID())
					if err != nil {
						return fmt.Errorf("%s, stream %v, c=%d: %w", t.Name, stream, c, err)
					}
					k := proxy.Cell{Stream: stream, Conc: c, Target: t.Name}
					trials[k] = append(trials[k], res)
				}
			}
		}
		fmt.Fprintf(os.Stderr, "round %d done\n", r+1)
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("load average after the run: %s\n", load)
	proxy.WriteReport(os.Stdout, trials, names, cs)
	return nil
}
