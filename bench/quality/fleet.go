package quality

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/server"
	"github.com/routerkit/router/runtime/sim"
)

// Policy is one routing setup under test: a policy block of the config and whether the
// engines publish KV events to the router (the prefix source of cache_aware).
type Policy struct {
	Name     string
	YAML     string
	KVEvents bool
}

// Policies are every policy with its defaults, and cache_aware with each prefix source
// this router has: its local index fed by KV events, and none (no events: it falls back
// to load on every request). The approximate index of issue 13 is not on main yet.
// power_of_two/kv_events is a control: power_of_two with the engines publishing KV events
// to the router as for cache_aware/local_index, which nothing reads. On two cores the
// event stream itself (engines publishing, the router indexing) slows every request
// somewhat, and cache_aware/local_index pays it on every workload; this row says how much.
var Policies = []Policy{
	{Name: "round_robin", YAML: "{type: round_robin}"},
	{Name: "random", YAML: "{type: random}"},
	{Name: "power_of_two", YAML: "{type: power_of_two}"},
	{Name: "load_based", YAML: "{type: load_based}"},
	{Name: "session_aware", YAML: "{type: session_aware}"},
	{Name: "sticky", YAML: "{type: sticky}"},
	{Name: "cache_aware/local_index", YAML: "{type: cache_aware}", KVEvents: true},
	{Name: "cache_aware/none", YAML: "{type: cache_aware}"},
	{Name: "power_of_two/kv_events", YAML: "{type: power_of_two}", KVEvents: true},
}

// FindPolicy returns the policy of this name.
func FindPolicy(name string) (Policy, bool) {
	for _, p := range Policies {
		if p.Name == name {
			return p, true
		}
	}
	return Policy{}, false
}

// EngineConfig is the simulated engines' performance model: the simulator's default GPU
// with a KV pool of 20 480 tokens, so that an engine holds three of the eight shared
// documents of 6000 tokens (all of them take 48 000), and contexts up to 8192 tokens.
func EngineConfig(timeScale float64) sim.Config {
	c := sim.DefaultConfig()
	c.KVCapacityTokens = 20480
	c.ContextLength = 8192
	c.TimeScale = timeScale
	return c
}

// config returns the router config of n engines of one model routed by pol.
func config(pol Policy, n int) []byte {
	var b strings.Builder
	b.WriteString("engines:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: E%d, url: \"http://127.0.0.1:%d\", model: m, role: plain", i+1, i+1)
		if pol.KVEvents {
			b.WriteString(`, kv_events: {endpoint: "tcp://127.0.0.1:0"}`)
		}
		b.WriteString("}\n")
	}
	fmt.Fprintf(&b, "models:\n  m:\n    buckets:\n      - id: all\n        limits: {min: 0}\n        groups:\n          plain:\n            policy: %s\n", pol.YAML)
	return []byte(b.String())
}

// Fleet is one or several routers serving n simulated engines, all in this process on
// 127.0.0.1. URL is the router's, or with several, a round-robin load balancer's in
// front of them.
type Fleet struct {
	URL     string
	engines *sim.Fleet
	routers []*router
	lb      *http.Server
}

// router is one serving router.
type router struct {
	url    string
	stop   context.CancelFunc
	served chan error
}

// StartFleet starts n simulated engines and a router over them with policy pol, and
// waits until the router is ready.
func StartFleet(ctx context.Context, pol Policy, n int, cfg sim.Config) (*Fleet, error) {
	return startFleet(ctx, pol.Name, config(pol, n), 1, func(string) sim.Config { return cfg })
}

// StartConfigFleet starts the engines of the router config yaml, all with performance
// model cfg, and the router over them: a workload of another package (bench/conformance)
// run on the simulator beside the engines it was written for.
func StartConfigFleet(ctx context.Context, name string, yaml []byte, cfg sim.Config) (*Fleet, error) {
	return startFleet(ctx, name, yaml, 1, func(string) sim.Config { return cfg })
}

// EngineURLs returns the simulated engines' base URLs.
func (f *Fleet) EngineURLs() []string {
	var urls []string
	for _, e := range f.engines.Engines() {
		urls = append(urls, e.URL())
	}
	return urls
}

// startFleet starts the engines of the router config yaml, each with the performance model
// cfgOf gives for its id, and replicas routers over them, and waits until they are ready.
func startFleet(ctx context.Context, name string, yaml []byte, replicas int, cfgOf func(id string) sim.Config) (*Fleet, error) {
	p, err := compile(name, yaml)
	if err != nil {
		return nil, err
	}
	specs, err := sim.SpecsFromPlan(p, sim.Config{})
	if err != nil {
		return nil, fmt.Errorf("simulated engines: %w", err)
	}
	for i := range specs {
		specs[i].Addr, specs[i].Config = "", cfgOf(specs[i].ID)
	}
	engines, err := sim.Start(context.WithoutCancel(ctx), specs)
	if err != nil {
		return nil, fmt.Errorf("simulated engines: %w", err)
	}
	f := &Fleet{engines: engines}
	for i := range replicas {
		if i > 0 {
			// Each replica compiles its own plan, as separate processes do.
			if p, err = compile(name, yaml); err != nil {
				f.Close()
				return nil, err
			}
		}
		r, err := f.serve(ctx, p)
		if err != nil {
			f.Close()
			return nil, err
		}
		f.routers = append(f.routers, r)
	}
	f.URL = f.routers[0].url
	if replicas > 1 {
		if err := f.balance(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

func compile(name string, yaml []byte) (*plan.Plan, error) {
	p, err := compiler.CompileSources([]compiler.Source{{Name: "bench.yaml", Data: yaml}})
	if err != nil {
		return nil, fmt.Errorf("compile the bench config of %s: %w", name, err)
	}
	return p, nil
}

// serve starts a router of p over the fleet's engines and waits until it is ready.
func (f *Fleet) serve(ctx context.Context, p *plan.Plan) (*router, error) {
	for i := range p.Engines {
		e := &p.Engines[i]
		se := f.engines.Engine(e.ID)
		e.URL = se.URL()
		if e.KVEvents != nil {
			e.KVEvents.Endpoint, e.KVEvents.Topic = se.KVEndpoints()[0], se.KVTopic()
		}
	}
	srv, err := server.New(p, server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &router{url: "http://" + ln.Addr().String(), stop: stop, served: make(chan error, 1)}
	go func() { r.served <- srv.Serve(sctx, ln) }()
	if err := awaitReady(ctx, r.url); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// balance puts a round-robin load balancer in front of the routers, as a Kubernetes
// Service or a cloud load balancer spreads requests over replicas: each request goes to
// the next router, whatever its conversation.
func (f *Fleet) balance() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("load balancer: %w", err)
	}
	var next atomic.Uint64
	targets := make([]*url.URL, len(f.routers))
	for i, r := range f.routers {
		if targets[i], err = url.Parse(r.url); err != nil {
			return err
		}
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(targets[(next.Add(1)-1)%uint64(len(targets))])
	}}
	f.lb = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.lb.Serve(ln) }()
	f.URL = "http://" + ln.Addr().String()
	return nil
}

// awaitReady polls a router's /readyz: it is ready once it has the engines' first load
// reports.
func awaitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return errors.New("router not ready after 10s")
}

func (r *router) close() {
	r.stop()
	<-r.served
}

// Close stops the load balancer, the routers and the engines.
func (f *Fleet) Close() {
	if f.lb != nil {
		_ = f.lb.Close()
	}
	for _, r := range f.routers {
		r.close()
	}
	f.engines.Close()
}
