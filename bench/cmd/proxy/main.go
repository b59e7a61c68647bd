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
	rounds := flag.Int("rounds", 7, "rounds; each runs every target once per cell, in rotated order")
	atOnce := flag.Int("at-once-rounds", 5, "rounds that run the bare proxy and each router at the same time, per cell (0: none)")
	atOnceTime := flag.Duration("at-once-time", 1500*time.Millisecond, "how long each at-once trial runs")
	n := flag.Int("requests", 3000, "requests per trial")
	concs := flag.String("concurrency", "1,8,64", "client concurrency levels")
	engines := flag.Int("engines", 4, "simulated engines")
	noNginx := flag.Bool("no-nginx", false, "leave nginx out even when installed")
	kindList := flag.String("kinds", "json,stream", "request kinds: json, stream, long (a conversation of about -long-bytes of prose), long_grow (that conversation grown by a turn per request)")
	longBytes := flag.Int("long-bytes", 620_000, "content bytes of the long kind's conversation")
	prosePath := flag.String("prose", "runtime/token/hf/testdata/text/prose.txt", "the prose the long kind's turns repeat")
	tokenizers := flag.String("tokenizers", "standin", "the routers' tokenizers: standin, or a directory with tokenizer.json.gz and tokenizer_config.json")
	routerFlags := flag.String("router-flags", "", "more flags for `router serve`, space-separated (say \"--log-level warn\")")
	baseline := flag.String("baseline", "", "a second router `binary` (another build): each router then runs at once beside this build's router of the same policy, not the bare proxy")
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

	var kinds []proxy.Kind
	for _, k := range strings.Split(*kindList, ",") {
		switch k {
		case "json":
			kinds = append(kinds, proxy.JSON)
		case "stream":
			kinds = append(kinds, proxy.Stream)
		case "long", "long_grow":
			prose, err := os.ReadFile(*prosePath)
			if err != nil {
				return fmt.Errorf("the %s kind's prose: %w (run from the repository's root or give -prose)", k, err)
			}
			kind := proxy.Long(prose, *longBytes)
			if k == "long_grow" {
				kind = proxy.Grow(prose, *longBytes)
			}
			kinds = append(kinds, kind)
		default:
			return fmt.Errorf("unknown kind %q: json, stream, long or long_grow", k)
		}
	}

	// Engines in this process, at time scale 0: they answer as fast as they can. Their
	// context holds the long kind's conversation.
	cfg := sim.DefaultConfig()
	cfg.TimeScale, cfg.ContextLength, cfg.KVCapacityTokens = 0, 256<<10, 512<<10
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
	var bareT *proxy.Target
	// routers run at once beside refs[i]: the bare proxy, or the baseline build's router
	// of the same policy and tokenizer.
	var routers, refs []*proxy.Target
	defer func() {
		for _, t := range targets {
			t.Stop()
		}
	}()
	t, err := proxy.StartBare(self, urls)
	if err != nil {
		return err
	}
	targets, bareT = append(targets, t), t
	for _, p := range strings.Split(*policies, ",") {
		for _, tok := range strings.Split(*tokenizers, ",") {
			if tok == "standin" {
				tok = ""
			}
			t, err := proxy.StartRouter(*routerBin, "router", dir, p, tok, urls, kvs, strings.Fields(*routerFlags)...)
			if err != nil {
				return err
			}
			targets, routers, refs = append(targets, t), append(routers, t), append(refs, bareT)
			if *baseline == "" {
				continue
			}
			if t, err = proxy.StartRouter(*baseline, "baseline", dir, p, tok, urls, kvs, strings.Fields(*routerFlags)...); err != nil {
				return err
			}
			targets, refs[len(refs)-1] = append(targets, t), t
		}
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
		for _, k := range kinds {
			if _, err := proxy.Trial(client, t.URL, k, 8, min(200, *n), time.Minute, 0); err != nil {
				return fmt.Errorf("warm-up of %s: %w", t.Name, err)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(os.Stderr, "%d targets, %d rounds, %d requests per trial, GOMAXPROCS %d, load %s", len(targets), *rounds, *n, runtime.GOMAXPROCS(0), load)
	trials := proxy.Trials{}
	err = rotate(*rounds, kinds, cs, targets, "round", func(kind proxy.Kind, c int, t *proxy.Target) error {
		res, err := proxy.Trial(client, t.URL, kind, c, *n, time.Minute, t.PID())
		if err != nil {
			return fmt.Errorf("%s, %s, c=%d: %w", t.Name, kind.Name, c, err)
		}
		k := proxy.Cell{Kind: kind.Name, Conc: c, Target: t.Name}
		trials[k] = append(trials[k], res)
		return nil
	})
	if err != nil {
		return err
	}
	pairs := proxy.Pairs{}
	ref := map[*proxy.Target]*proxy.Target{}
	for i, t := range routers {
		ref[t] = refs[i]
	}
	err = rotate(*atOnce, kinds, cs, routers, "at-once round", func(kind proxy.Kind, c int, t *proxy.Target) error {
		res, err := proxy.AtOnce(client, []*proxy.Target{ref[t], t}, kind, c, *atOnceTime)
		if err != nil {
			return fmt.Errorf("at once, %s, c=%d: %w", kind.Name, c, err)
		}
		k := proxy.Cell{Kind: kind.Name, Conc: c, Target: t.Name}
		pairs[k] = append(pairs[k], [2]proxy.Result{res[0], res[1]})
		return nil
	})
	if err != nil {
		return err
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("load average after the run: %s\n", load)
	var kindNames, routerNames []string
	for _, k := range kinds {
		kindNames = append(kindNames, k.Name)
	}
	for _, t := range routers {
		routerNames = append(routerNames, t.Name)
	}
	proxy.WriteReport(os.Stdout, trials, kindNames, names, cs)
	switch {
	case len(pairs) > 0 && *baseline == "":
		fmt.Println("\nEach router and the bare proxy at the same time, a client each:")
		fmt.Println()
		proxy.WriteAtOnce(os.Stdout, pairs, "bare", kindNames, routerNames, cs)
	case len(pairs) > 0:
		fmt.Printf("\nEach router and the baseline build's (%s) of its policy at the same time, a client each:\n\n", *baseline)
		proxy.WriteAtOnce(os.Stdout, pairs, "baseline", kindNames, routerNames, cs)
	}
	return nil
}

// rotate runs each of rounds rounds: for every kind and concurrency, run once per
// target, the targets' order rotated by one every round. It reports each round done on
// stderr as label N.
func rotate(rounds int, kinds []proxy.Kind, cs []int, targets []*proxy.Target, label string, run func(proxy.Kind, int, *proxy.Target) error) error {
	for r := range rounds {
		for _, kind := range kinds {
			for _, c := range cs {
				for i := range targets {
					if err := run(kind, c, targets[(i+r)%len(targets)]); err != nil {
						return err
					}
				}
			}
		}
		fmt.Fprintf(os.Stderr, "%s %d done\n", label, r+1)
	}
	return nil
}
