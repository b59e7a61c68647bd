package conformance

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	benchquality "github.com/routerkit/router/bench/quality"
	"github.com/routerkit/router/runtime/sim"
)

// Options are a run's programs and sizes.
type Options struct {
	Router, Sim string // binaries
	Dir         string // scratch directory for configs and logs
	// Quality run: requests over documents, concurrency clients at once.
	Requests, Documents, Concurrency int
	Seed                             uint64
}

// Result is a run's outcome: a line per check, and the routing-quality rows on
// llm-d-inference-sim and, for the same workload, on the router's own simulator.
type Result struct {
	Checks  []Check
	Quality []QualityRow
	Builtin []QualityRow
}

// Check is one conformance check.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

// Failed counts the failed checks.
func (r Result) Failed() int {
	n := 0
	for _, c := range r.Checks {
		if !c.OK {
			n++
		}
	}
	return n
}

func (r *Result) check(name string, ok bool, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// fleet is two simulators publishing to one router bind endpoint, and the router.
type fleet struct {
	sims   []*Sim
	router *Router
}

func (f *fleet) stop() {
	if f.router != nil {
		f.router.Stop()
	}
	for _, s := range f.sims {
		s.Kill()
	}
}

// startFleet starts two simulators and a router over them with policy; the router listens
// for both simulators' KV events on one bind endpoint.
func startFleet(o Options, dir string, policy string, so SimOptions) (*fleet, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kvPort, err := freePort()
	if err != nil {
		return nil, err
	}
	kvEndpoint := "tcp://127.0.0.1:" + strconv.Itoa(kvPort)
	f := &fleet{}
	for _, name := range []string{"simA", "simB"} {
		s, err := NewSim(dir, name, kvEndpoint, so)
		if err != nil {
			return nil, err
		}
		f.sims = append(f.sims, s)
	}
	var b strings.Builder
	b.WriteString("engines:\n")
	for _, s := range f.sims {
		fmt.Fprintf(&b, "  - {id: %s, url: %q, model: %s, role: plain, kind: vllm, load: {interval_ms: 200},\n"+
			"     kv_events: {mode: bind, endpoint: %q, topic: %q, block_size: 16}}\n", s.Name, s.URL(), Model, kvEndpoint, s.Topic())
	}
	fmt.Fprintf(&b, "models:\n  %s:\n    buckets:\n      - id: all\n        limits: {min: 0}\n        groups:\n          plain:\n"+
		"            policy: {type: %s%s, admission: {max_inflight_requests: 100000}}\n", Model, policy, policyExtra(policy))
	// The router first, so that its bind endpoint is up when the publishers dial.
	if f.router, err = StartRouter(o.Router, dir, b.String()); err != nil {
		return nil, err
	}
	for _, s := range f.sims {
		if err := s.Start(o.Sim); err != nil {
			f.stop()
			return nil, err
		}
	}
	if err := waitOK(f.router.URL+"/readyz", 30*time.Second); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

// until polls cond every 50 ms for up to limit.
func until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// prompt returns n token ids of document doc followed by a suffix of m ids unique to
// (doc, k): ids the simulator's dummy tokenizer never sees, since they are sent as a
// token-id prompt, so the router's prefix hashes and the simulator's KV events agree.
func prompt(doc, n, k, m int) []uint32 {
	out := make([]uint32, 0, n+m)
	for i := range n {
		out = append(out, uint32(1000+doc*100003+i*7)%50000+1)
	}
	for i := range m {
		out = append(out, uint32(60000+k*131+i))
	}
	return out
}

// Run runs every check, then the routing-quality comparison.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	for _, format := range []string{"array", "map"} {
		if err := checkFormat(ctx, o, format, &res); err != nil {
			return res, fmt.Errorf("%s format: %w", format, err)
		}
	}
	var err error
	if res.Quality, err = compare(&res, "", func(policy string) (QualityRow, error) { return quality(ctx, o, policy) }); err != nil {
		return res, fmt.Errorf("quality run, %w", err)
	}
	if res.Builtin, err = compare(&res, " on the built-in simulator", func(policy string) (QualityRow, error) { return builtinQuality(ctx, o, policy) }); err != nil {
		return res, fmt.Errorf("quality run on the built-in simulator, %w", err)
	}
	return res, nil
}

// compare runs the quality workload under cache_aware and power_of_two and checks that
// cache_aware serves more prompt tokens from the engines' caches; where names the engines
// in the check's name.
func compare(res *Result, where string, run func(policy string) (QualityRow, error)) ([]QualityRow, error) {
	var rows []QualityRow
	for _, policy := range []string{"cache_aware", "power_of_two"} {
		row, err := run(policy)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", policy, err)
		}
		rows = append(rows, row)
	}
	ca, p2 := rows[0], rows[1]
	res.check("routing quality"+where+": cache_aware caches more prompt tokens than power_of_two", ca.CachedFraction > p2.CachedFraction,
		"cached-token fraction %.3f vs %.3f", ca.CachedFraction, p2.CachedFraction)
	return rows, nil
}

// checkFormat runs the event, load, restart and repeated-completion checks against two
// simulators publishing in one event format.
func checkFormat(ctx context.Context, o Options, format string, res *Result) error {
	f, err := startFleet(o, filepath.Join(o.Dir, format), "cache_aware", SimOptions{MapFormat: format == "map", PrefillPerToken: 10 * time.Microsecond, CacheBlocks: 4096})
	if err != nil {
		return err
	}
	defer f.stop()
	client := &http.Client{Timeout: 30 * time.Second}
	r := f.router
	name := func(what string) string { return format + " format: " + what }

	// vLLM load from /metrics: every engine gets a fresh report.
	var st State
	ok := until(10*time.Second, func() bool {
		st, _ = r.AdminState()
		for _, s := range f.sims {
			e := st.Engine(s.Name)
			if e.Load == nil || e.ReportAgeMS < 0 || e.LoadError != "" {
				return false
			}
		}
		return true
	})
	res.check(name("vLLM load from the simulators' /metrics"), ok, "load errors: %q, %q",
		st.Engine("simA").LoadError, st.Engine("simB").LoadError)

	// Both publishers on the one bind endpoint: a completion sent to each simulator
	// directly is indexed under that simulator.
	for i, s := range f.sims {
		if _, err := Complete(ctx, client, s.URL(), prompt(100+i, 512, 0, 0)); err != nil {
			return err
		}
	}
	ok = until(10*time.Second, func() bool {
		st, _ = r.AdminState()
		return st.Engine("simA").Blocks() >= 31 && st.Engine("simB").Blocks() >= 31
	})
	res.check(name("two publishers on one bind endpoint, each indexed under its topic"), ok,
		"blocks simA=%d simB=%d, want at least 31 each (512 tokens)", st.Engine("simA").Blocks(), st.Engine("simB").Blocks())

	// Repeated completions: a prompt first served by one simulator directly (alternating
	// between them, so that picking by load alone would be right half the time), then
	// sent through the router, goes to that simulator, which counts it as prefix hits.
	before := map[string]PrefixCache{}
	for _, s := range f.sims {
		if before[s.Name], err = ReadPrefixCache(s); err != nil {
			return err
		}
	}
	const repeats = 8
	same := 0
	for k := range repeats {
		p := prompt(200+k, 1024, k, 16)
		holder := f.sims[k%2]
		st, _ = r.AdminState()
		held := st.Engine(holder.Name).Blocks()
		if _, err := Complete(ctx, client, holder.URL(), p); err != nil {
			return err
		}
		// The completion's 65 blocks reach the index through the simulator's events.
		until(5*time.Second, func() bool {
			st, _ = r.AdminState()
			return st.Engine(holder.Name).Blocks() >= held+len(p)/16
		})
		picked, err := routed(ctx, client, r, p)
		if err != nil {
			return err
		}
		if picked == holder.Name {
			same++
		}
	}
	var hits PrefixCache
	for _, s := range f.sims {
		now, err := ReadPrefixCache(s)
		if err != nil {
			return err
		}
		d := now.Sub(before[s.Name])
		hits.Queries += d.Queries
		hits.Hits += d.Hits
	}
	res.check(name("repeated completions go to the engine holding the prefix"), same == repeats, "%d of %d", same, repeats)
	res.check(name("the simulators count the repeats as prefix-cache hits"), hits.Hits >= 0.4*hits.Queries,
		"%.0f of %.0f prompt tokens hit (the repeats are half the tokens)", hits.Hits, hits.Queries)

	// One publisher restarting: killing simA clears simA's entries and keeps simB's;
	// the restarted simA is indexed again.
	st, _ = r.AdminState()
	keep := st.Engine("simB").Blocks()
	f.sims[0].Kill()
	ok = until(10*time.Second, func() bool {
		st, _ = r.AdminState()
		return st.Engine("simA").Blocks() == 0
	})
	kept := st.Engine("simB").Blocks()
	res.check(name("a publisher leaving clears its own engine's entries"), ok, "simA blocks %d after its publisher left", st.Engine("simA").Blocks())
	res.check(name("a publisher leaving keeps its neighbour's entries"), kept == keep, "simB blocks %d, were %d", kept, keep)
	if err := f.sims[0].Start(o.Sim); err != nil {
		return err
	}
	if _, err := Complete(ctx, client, f.sims[0].URL(), prompt(300, 512, 0, 0)); err != nil {
		return err
	}
	ok = until(10*time.Second, func() bool {
		st, _ = r.AdminState()
		return st.Engine("simA").Blocks() >= 31
	})
	res.check(name("a restarted publisher is indexed again"), ok && st.Engine("simB").Blocks() == keep,
		"simA blocks %d, simB blocks %d (were %d)", st.Engine("simA").Blocks(), st.Engine("simB").Blocks(), keep)
	return nil
}

// routed sends prompt through the router and returns the engine its decision named.
func routed(ctx context.Context, client *http.Client, r *Router, p []uint32) (string, error) {
	if _, err := Complete(ctx, client, r.URL, p); err != nil {
		return "", err
	}
	st, err := r.AdminState()
	if err != nil {
		return "", err
	}
	if len(st.Decisions) == 0 {
		return "", fmt.Errorf("the router lists no decision after a completion")
	}
	for _, e := range st.Decisions[0].Engines { // newest first
		return e, nil
	}
	return "", fmt.Errorf("the router's last decision names no engine")
}

// QualityRow is one policy's figures in the routing-quality run.
type QualityRow struct {
	Policy         string
	Requests       int
	TTFTp50        time.Duration
	TTFTp90        time.Duration
	CachedFraction float64 // prompt tokens the simulators served from their prefix cache
}

// quality runs the workload against fresh simulators under policy: documents shared
// prefixes of 1536 tokens, each request one of them (uniformly, seeded) plus a 32-token
// suffix of its own, concurrency clients at once. Each simulator's KV cache holds 512
// blocks (8192 tokens), so one engine cannot hold every document and the two together
// can: prefill time, 100 µs per uncached token, rewards the policy that keeps each
// document on one engine.
func quality(ctx context.Context, o Options, policy string) (QualityRow, error) {
	f, err := startFleet(o, filepath.Join(o.Dir, "quality-"+policy), policy,
		SimOptions{PrefillPerToken: 100 * time.Microsecond, CacheBlocks: 512})
	if err != nil {
		return QualityRow{}, err
	}
	defer f.stop()
	var engines []string
	for _, s := range f.sims {
		engines = append(engines, s.URL())
	}
	return runQuality(ctx, o, policy, f.router.URL, engines)
}

// builtinQuality runs the quality workload on two of the router's own simulated engines
// (runtime/sim, vLLM kind, KV events to the router) modelled as the llm-d simulators are:
// 100 µs per uncached prompt token and nothing else, 512 blocks of 16 tokens each
// (contexts up to 4096 tokens, which the simulator requires the cache to hold).
func builtinQuality(ctx context.Context, o Options, policy string) (QualityRow, error) {
	var b strings.Builder
	b.WriteString("engines:\n")
	for i, id := range []string{"simA", "simB"} { // the urls are placeholders: the engines pick their ports
		fmt.Fprintf(&b, "  - {id: %s, url: \"http://127.0.0.1:%d\", model: %s, role: plain, kind: vllm, load: {interval_ms: 200},\n"+
			"     kv_events: {endpoint: \"tcp://127.0.0.1:0\", block_size: 16}}\n", id, i+1, Model)
	}
	fmt.Fprintf(&b, "models:\n  %s:\n    buckets:\n      - id: all\n        limits: {min: 0}\n        groups:\n          plain:\n"+
		"            policy: {type: %s%s, admission: {max_inflight_requests: 100000}}\n", Model, policy, policyExtra(policy))
	cfg := sim.DefaultConfig()
	cfg.PrefillOverhead, cfg.PrefillPerToken, cfg.DecodePerToken = 0, 100*time.Microsecond, 0
	cfg.KVCapacityTokens, cfg.BlockSize, cfg.ContextLength = 512*16, 16, 4096
	f, err := benchquality.StartConfigFleet(ctx, "builtin-"+policy, []byte(b.String()), cfg)
	if err != nil {
		return QualityRow{}, err
	}
	defer f.Close()
	return runQuality(ctx, o, policy, f.URL, f.EngineURLs())
}

// policyExtra is the policy settings beside its type: cache_aware's thresholds.
func policyExtra(policy string) string {
	if policy == "cache_aware" {
		return ", min_matched_tokens: 256, switch_margin_tokens: 256"
	}
	return ""
}

// runQuality sends the quality workload to the router at base and reads the cached-token
// fraction from the engines at engines.
func runQuality(ctx context.Context, o Options, policy, base string, engines []string) (QualityRow, error) {
	before := map[string]PrefixCache{}
	for _, e := range engines {
		var err error
		if before[e], err = readPrefixCache(e); err != nil {
			return QualityRow{}, err
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, 28))
	prompts := make(chan []uint32, o.Requests)
	for k := range o.Requests {
		prompts <- prompt(rng.IntN(o.Documents), 1536, k, 32)
	}
	close(prompts)
	client := &http.Client{Timeout: 60 * time.Second}
	var mu sync.Mutex
	var ttfts []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Go(func() {
			for p := range prompts {
				d, err := Complete(ctx, client, base, p)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					ttfts = append(ttfts, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return QualityRow{}, firstErr
	}
	var total PrefixCache
	for _, e := range engines {
		now, err := readPrefixCache(e)
		if err != nil {
			return QualityRow{}, err
		}
		d := now.Sub(before[e])
		total.Queries += d.Queries
		total.Hits += d.Hits
	}
	slices.Sort(ttfts)
	row := QualityRow{Policy: policy, Requests: len(ttfts), TTFTp50: quantile(ttfts, 0.5), TTFTp90: quantile(ttfts, 0.9)}
	if total.Queries > 0 {
		row.CachedFraction = total.Hits / total.Queries
	}
	return row, nil
}

// quantile returns the q-quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Report writes the checks and the quality table as Markdown.
func Report(w io.Writer, r Result) {
	fmt.Fprintln(w, "| check | result | detail |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, c := range r.Checks {
		res := "pass"
		if !c.OK {
			res = "**FAIL**"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.Name, res, c.Detail)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| engines | policy | requests | TTFT p50 | TTFT p90 | cached-token fraction |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, set := range []struct {
		engines string
		rows    []QualityRow
	}{{"llm-d-inference-sim", r.Quality}, {"built-in simulator", r.Builtin}} {
		for _, q := range set.rows {
			fmt.Fprintf(w, "| %s | %s | %d | %.1f ms | %.1f ms | %.3f |\n", set.engines, q.Policy, q.Requests,
				float64(q.TTFTp50.Microseconds())/1000, float64(q.TTFTp90.Microseconds())/1000, q.CachedFraction)
		}
	}
	passed := len(r.Checks) - r.Failed()
	fmt.Fprintf(w, "\nconformance: %d passed, %d failed\n", passed, r.Failed())
}
