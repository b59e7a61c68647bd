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
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/routerkit/router/bench/proxy"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
	"github.com/routerkit/router/runtime/token/hf"
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
	concs := flag.String("concurrency", "1,16,64", "client concurrency levels (issue 30 states the nginx goal at 16)")
	engines := flag.Int("engines", 4, "simulated engines")
	noNginx := flag.Bool("no-nginx", false, "leave nginx out even when installed")
	kindList := flag.String("kinds", "json,stream", "request kinds: json, stream, long (a conversation of about -long-bytes of prose), long_grow (that conversation grown by a turn per request)")
	longBytes := flag.Int("long-bytes", 620_000, "content bytes of the long kind's conversation")
	prosePath := flag.String("prose", "runtime/token/hf/testdata/text/prose.txt", "the prose the long kind's turns repeat")
	tokenizers := flag.String("tokenizers", "standin", "the routers' tokenizers: standin, or a directory with tokenizer.json.gz and tokenizer_config.json")
	routerFlags := flag.String("router-flags", "", "more flags for `router serve`, space-separated (say \"--log-level warn\")")
	extra := flag.String("extra-routers", "cache_aware:testdata/tokenizers/qwen3", "more routers beside -policies × -tokenizers, as comma-separated `policy:tokenizer` pairs")
	wrkRounds := flag.Int("wrk-rounds", 3, "rounds of the second harness, wrk, through every proxy per cell (0: none; left out when wrk is not installed)")
	idleTime := flag.Duration("idle-time", 3*time.Second, "how long each target's CPU is measured with no requests, after the warm-up")
	wrkTime := flag.Duration("wrk-time", 2*time.Second, "how long each wrk trial runs (whole seconds)")
	engineTok := flag.String("engine-tokenizer", "", "the simulated engines' tokenizer `directory` (as -tokenizers; empty: the stand-in): with the routers', their KV events name the blocks the routers hash, so cache_aware matches prefixes")
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
	specs := sim.PlainSGLang(*engines, "m", cfg, &sim.KVEventsSpec{Endpoint: "tcp://127.0.0.1:0"})
	if *engineTok != "" {
		tok, err := hf.Open(plan.Tokenizer{Path: filepath.Join(*engineTok, "tokenizer.json.gz"), Config: filepath.Join(*engineTok, "tokenizer_config.json")})
		if err != nil {
			return fmt.Errorf("the engines' tokenizer: %w", err)
		}
		for i := range specs {
			specs[i].Tokenizer = tok
		}
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
	rs, err := routerSpecs(*policies, *tokenizers, *extra)
	if err != nil {
		return err
	}
	for _, s := range rs {
		t, err := proxy.StartRouter(*routerBin, "router", dir, s.policy, s.tokenizer, urls, kvs, strings.Fields(*routerFlags)...)
		if err != nil {
			return err
		}
		targets, routers, refs = append(targets, t), append(routers, t), append(refs, bareT)
		if *baseline == "" {
			continue
		}
		if t, err = proxy.StartRouter(*baseline, "baseline", dir, s.policy, s.tokenizer, urls, kvs, strings.Fields(*routerFlags)...); err != nil {
			return err
		}
		targets, refs[len(refs)-1] = append(targets, t), t
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
	// of a single client process). Every trial starts with no idle connection: the
	// client's pool would otherwise carry the 64 connections of the last 64-client trial
	// into the next one-client trials, held open in the proxies, where wrk opens its own
	// for each run; with them, the router's CPU per request at one client was 1.16× the
	// bare proxy's, and 0.93× without (docs/benchmarks.md).
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256}, Timeout: time.Minute}
	for _, t := range targets { // warm up connections and caches
		for _, k := range kinds {
			if _, err := proxy.Trial(client, t.URL, k, 8, min(200, *n), time.Minute, 0); err != nil {
				return fmt.Errorf("warm-up of %s: %w", t.Name, err)
			}
		}
	}
	idle, err := proxy.IdleCPU(targets[1:], *idleTime)
	if err != nil {
		return err
	}
	loadBefore, rev := loadAvg(), commit()
	fmt.Fprintf(os.Stderr, "%d targets, %d rounds, %d requests per trial, GOMAXPROCS %d, load %s\n", len(targets), *rounds, *n, runtime.GOMAXPROCS(0), loadBefore)
	trials, err := backToBack(*rounds, kinds, cs, targets, "round", func(kind proxy.Kind, c int, t *proxy.Target) (proxy.Result, error) {
		client.CloseIdleConnections()
		return proxy.Trial(client, t.URL, kind, c, *n, time.Minute, t.PID())
	})
	if err != nil {
		return err
	}
	ref := map[*proxy.Target]*proxy.Target{}
	for i, t := range routers {
		ref[t] = refs[i]
	}
	pairs, err := besideRef(*atOnce, kinds, cs, routers, ref, "at-once round", func(kind proxy.Kind, c int, ts []*proxy.Target) ([]proxy.Result, error) {
		client.CloseIdleConnections()
		return proxy.AtOnce(client, ts, kind, c, *atOnceTime)
	})
	if err != nil {
		return err
	}
	wrkTrials, wrkPairs, wrk := proxy.Trials{}, proxy.Pairs{}, (*proxy.Wrk)(nil)
	if *wrkRounds > 0 {
		if wrk, err = proxy.NewWrk(dir, kinds); err != nil {
			return err
		}
		if wrk == nil {
			fmt.Fprintln(os.Stderr, "wrk not installed: the second harness left out (make wrk-nginx installs it)")
		}
	}
	if wrk != nil {
		wrkTrials, err = backToBack(*wrkRounds, kinds, cs, targets[1:], "wrk round", func(kind proxy.Kind, c int, t *proxy.Target) (proxy.Result, error) {
			return wrk.Trial(t.URL, kind, c, *wrkTime, t.PID())
		})
		if err != nil {
			return err
		}
		wrkPairs, err = besideRef(*wrkRounds, kinds, cs, routers, ref, "wrk at-once round", func(kind proxy.Kind, c int, ts []*proxy.Target) ([]proxy.Result, error) {
			return wrk.AtOnce(ts, kind, c, *wrkTime)
		})
		if err != nil {
			return err
		}
	}
	mem := map[string]proxy.Memory{}
	for _, t := range targets[1:] {
		if mem[t.Name], err = proxy.ProcessMemory(t.PID()); err != nil {
			return err
		}
	}

	var kindNames, routerNames []string
	for _, k := range kinds {
		kindNames = append(kindNames, k.Name)
	}
	for _, t := range routers {
		routerNames = append(routerNames, t.Name)
	}
	fmt.Printf("bench-proxy, %s, commit %s, %s, %d CPUs (GOMAXPROCS %d), load average (1, 5, 15 min) %s before the run and %s after it; other jobs may share the machine.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), rev, runtime.Version(), runtime.NumCPU(), runtime.GOMAXPROCS(0), loadBefore, loadAvg())
	fmt.Printf("Command: `go run ./bench/cmd/proxy %s`\n\n", shellJoin(os.Args[1:]))
	fmt.Printf("Back to back, our client: each target in turn, %d requests per trial from a Go net/http client in the process of the engines, %d rounds in rotated order; CPU per request from /proc/PID/task/*/schedstat over the trial; ratios paired per round, median (range).\n\n", *n, *rounds)
	proxy.WriteReport(os.Stdout, trials, kindNames, names, cs)
	if len(pairs) > 0 {
		refName, refDesc := "bare", "the bare proxy"
		if *baseline != "" {
			refName, refDesc = "baseline", "the baseline build's router of its policy ("+*baseline+")"
		}
		fmt.Printf("\nAt once, our client: each router and %s at the same time for %v, a client each, %d rounds.\n\n", refDesc, *atOnceTime, *atOnce)
		proxy.WriteAtOnce(os.Stdout, pairs, refName, kindNames, routerNames, cs)
	}
	if *baseline != "" {
		pairs, wrkPairs = nil, nil // the at-once ratios are against the baseline build, not the bare proxy
	}
	if wrk != nil {
		fmt.Printf("\nTwo harnesses: the rounds above (ours) beside wrk (`wrk -t min(c,%d) -c c -d %v --latency -s post.lua`, the same bodies), %d rounds of each proxy in turn in rotated order, then %[3]d at-once rounds of each router beside the bare proxy, a wrk each; CPU as above; medians of paired rounds.\n\n", runtime.NumCPU(), *wrkTime, *wrkRounds)
		proxy.WriteHarnesses(os.Stdout, trials, wrkTrials, pairs, wrkPairs, kindNames, names, cs)
	}
	fmt.Printf("\nMemory after the run (/proc/PID/status, nginx with its workers), and CPU with no requests for %v after the warm-up:\n\n", *idleTime)
	proxy.WriteResources(os.Stdout, mem, idle, names)
	fmt.Println()
	proxy.WriteNginxLine(os.Stdout, trials, wrkTrials, kindNames, routerNames, nginxConc, nginxGoal)
	return nil
}

// Issue 30's goal: the router's CPU per request at most 2.5 times nginx's at 16 clients.
const (
	nginxConc = 16
	nginxGoal = 2.5
)

// routerSpec is one router of the run: a policy and a tokenizer directory ("" for the
// stand-in vocabulary).
type routerSpec struct{ policy, tokenizer string }

// routerSpecs lists every policy with every tokenizer, then the extra policy:tokenizer
// pairs not already listed.
func routerSpecs(policies, tokenizers, extra string) ([]routerSpec, error) {
	var rs []routerSpec
	add := func(p, tok string) {
		if tok == "standin" {
			tok = ""
		}
		if s := (routerSpec{p, tok}); !slices.Contains(rs, s) {
			rs = append(rs, s)
		}
	}
	for _, p := range strings.Split(policies, ",") {
		for _, tok := range strings.Split(tokenizers, ",") {
			add(p, tok)
		}
	}
	for _, e := range strings.Split(extra, ",") {
		if e == "" {
			continue
		}
		p, tok, ok := strings.Cut(e, ":")
		if !ok || p == "" || tok == "" {
			return nil, fmt.Errorf("bad -extra-routers entry %q: want policy:tokenizer", e)
		}
		add(p, tok)
	}
	return rs, nil
}

// shellJoin joins args as a shell would read them back: quoted when empty or when they
// hold a space or a quote.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t'\"") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// loadAvg is /proc/loadavg's three load averages.
func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

// commit names the checked-out commit, marked when the work tree differs from it.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " with uncommitted changes"
	}
	return c
}

// backToBack runs rounds of trial through every target in turn (see rotate) and
// collects the results per cell.
func backToBack(rounds int, kinds []proxy.Kind, cs []int, targets []*proxy.Target, label string, trial func(proxy.Kind, int, *proxy.Target) (proxy.Result, error)) (proxy.Trials, error) {
	out := proxy.Trials{}
	err := rotate(rounds, kinds, cs, targets, label, func(kind proxy.Kind, c int, t *proxy.Target) error {
		res, err := trial(kind, c, t)
		if err != nil {
			return fmt.Errorf("%s: %s, %s, c=%d: %w", label, t.Name, kind.Name, c, err)
		}
		k := proxy.Cell{Kind: kind.Name, Conc: c, Target: t.Name}
		out[k] = append(out[k], res)
		return nil
	})
	return out, err
}

// besideRef runs rounds of run with each router and its reference ref[router] at once
// (see rotate) and collects the pairs of results per cell, the reference's first.
func besideRef(rounds int, kinds []proxy.Kind, cs []int, routers []*proxy.Target, ref map[*proxy.Target]*proxy.Target, label string, run func(proxy.Kind, int, []*proxy.Target) ([]proxy.Result, error)) (proxy.Pairs, error) {
	out := proxy.Pairs{}
	err := rotate(rounds, kinds, cs, routers, label, func(kind proxy.Kind, c int, t *proxy.Target) error {
		res, err := run(kind, c, []*proxy.Target{ref[t], t})
		if err != nil {
			return fmt.Errorf("%s: %s, c=%d: %w", label, kind.Name, c, err)
		}
		k := proxy.Cell{Kind: kind.Name, Conc: c, Target: t.Name}
		out[k] = append(out[k], [2]proxy.Result{res[0], res[1]})
		return nil
	})
	return out, err
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
