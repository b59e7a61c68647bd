// Package server is the HTTP router: it prepares each chat request once, runs the
// bucket-first selection pass, and dispatches to the selected plain engine or
// prefill/decode pair only after a complete selection. Beside the data plane it serves
// health, readiness, models, Prometheus metrics and the admin state and explain endpoints.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/monitor"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/token"
	"github.com/routerkit/router/runtime/token/hf"
)

// Options are the server's injectable parts; zero values give production defaults.
type Options struct {
	// Transport carries requests to engines; nil uses a pooled transport sized for a
	// router (many idle connections per engine).
	Transport http.RoundTripper
	Logger    *slog.Logger
	// Rand is the policies' randomness; nil uses a lock-free process-wide source.
	Rand policy.Rand
	// RecentDecisions is how many decisions /admin/state keeps (default 64).
	RecentDecisions int
	// Clock is the circuit breakers' time source; nil means time.Now.
	Clock func() time.Time
}

// served is a model the router serves with its resolver and tokenizer.
type served struct {
	plan     *plan.Model
	resolver *bucket.Resolver
	tok      token.Tokenizer
	// tokName names tok in explanations.
	tokName string
}

// Server is a router built from one plan.
type Server struct {
	plan      *plan.Plan
	reg       *engine.Registry
	table     *load.Table
	models    map[string]*served
	modelList string
	monitor   *monitor.Monitor
	deps      policy.Deps
	metrics   *metrics
	recent    *recent
	client    *http.Client
	log       *slog.Logger
	started   time.Time
	draining  atomic.Bool

	timeouts timeouts
	headers  headerPolicy
	targets  map[string]*url.URL
	// kvTransfer holds the prefill engines that speak vLLM's kv_transfer_params PD
	// protocol rather than SGLang's bootstrap protocol.
	kvTransfer  map[string]bool
	maxAttempts int
	// active caps concurrent chat requests (limits.max_concurrent_requests) and lets
	// shutdown wait for their final words.
	active *activeSet
	// hardStop is cancelled when the shutdown grace period runs out: every dispatch
	// still running ends, a stream with an error event.
	hardStop context.Context
	stopHard context.CancelFunc
}

// New builds a router from a compiled plan.
func New(p *plan.Plan, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	tos := timeoutsOf(p.Timeouts)
	if opts.Transport == nil {
		opts.Transport = newTransport(tos)
	}
	if opts.RecentDecisions <= 0 {
		opts.RecentDecisions = 64
	}
	reg, err := engine.FromPlan(p.Engines)
	if err != nil {
		return nil, fmt.Errorf("building worker registry: %w", err)
	}
	s := &Server{
		plan: p, reg: reg, table: load.NewTable(p.Engines, nil),
		models: map[string]*served{}, log: opts.Logger,
		// An engine's redirect is an answer to report, never to follow.
		client: &http.Client{Transport: opts.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		recent:      newRecent(opts.RecentDecisions),
		metrics:     newMetrics(planModels(p)),
		started:     time.Now(),
		timeouts:    tos,
		headers:     newHeaderPolicy(p.Headers),
		targets:     map[string]*url.URL{},
		kvTransfer:  map[string]bool{},
		maxAttempts: max(p.Retries.MaxAttempts, 1),
		active:      newActiveSet(p.Limits.MaxConcurrentRequests),
	}
	s.hardStop, s.stopHard = context.WithCancel(context.Background())
	for _, e := range p.Engines {
		u, err := url.Parse(e.URL)
		if err != nil {
			return nil, fmt.Errorf("engine %s: url: %w", e.ID, err)
		}
		s.targets[e.ID] = u
		s.kvTransfer[e.ID] = e.Role == plan.RolePrefill && e.PDProtocol == plan.PDKVTransferParams
		reg.Get(e.ID).SetBreaker(newBreaker(p.Breaker, opts.Clock))
	}
	deps, err := policy.NewDeps(p, s.table, opts.Rand, nil)
	if err != nil {
		return nil, fmt.Errorf("building policy state: %w", err)
	}
	s.deps = deps
	names := make([]string, 0, len(p.Models))
	for i := range p.Models {
		m := &p.Models[i]
		r, err := bucket.NewResolver(*m, reg, deps)
		if err != nil {
			return nil, fmt.Errorf("building buckets of model %s: %w", m.Name, err)
		}
		tok, err := hf.ForModel(m)
		if err != nil {
			return nil, fmt.Errorf("loading the tokenizer of model %s: %w", m.Name, err)
		}
		s.models[m.Name] = &served{plan: m, resolver: r, tok: tok, tokName: hf.Describe(m)}
		names = append(names, m.Name)
	}
	s.modelList = strings.Join(names, ", ")
	s.monitor = monitor.New(p, reg, s.table, s.client, s.log)
	s.metrics.registerEngines(s)
	s.metrics.reg.MustRegister(newTokenCacheCollector(s.models))
	s.metrics.reg.MustRegister(s.deps.Affinity) // the binding store's health
	s.deps.Affinity.SetLogger(s.log)
	if s.deps.KV != nil {
		// The prefix index counts what it could not use of the engines' KV events.
		s.metrics.reg.MustRegister(s.deps.KV)
	}
	return s, nil
}

func planModels(p *plan.Plan) []string {
	names := make([]string, len(p.Models))
	for i, m := range p.Models {
		names[i] = m.Name
	}
	return names
}

// Handler returns the router's HTTP routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.routed(s.prepareChat))
	mux.HandleFunc("POST /v1/completions", s.routed(s.prepareCompletion))
	mux.HandleFunc("POST /generate", s.routed(s.prepareGenerate))
	mux.HandleFunc("POST /v1/embeddings", s.routed(s.prepareInputs(embeddingsShape)))
	mux.HandleFunc("POST /v1/rerank", s.routed(s.prepareInputs(rerankShape)))
	mux.HandleFunc("POST /v1/score", s.routed(s.prepareInputs(scoreShape)))
	mux.HandleFunc("POST /classify", s.routed(s.prepareInputs(classifyShape)))
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/{id}", s.getModel)
	mux.HandleFunc("GET /get_model_info", s.engineInfo)
	mux.HandleFunc("GET /get_server_info", s.engineInfo)
	for _, prefix := range []string{"/v1", ""} {
		mux.HandleFunc("POST "+prefix+"/tokenize", s.tokenize)
		mux.HandleFunc("POST "+prefix+"/detokenize", s.detokenize)
	}
	for _, path := range []string{"GET /healthz", "GET /health"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	}
	mux.HandleFunc("GET /readyz", s.ready)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("GET /admin/state", s.admin(s.state))
	mux.HandleFunc("POST /admin/explain", s.admin(s.explain))
	mux.HandleFunc("/", s.noRoute)
	return mux
}

// Serve checks engine health once, then serves on ln until ctx is done. It then stops
// accepting, reports not-ready, lets in-flight requests finish within the plan's grace
// period and returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	monCtx, stopMonitor := context.WithCancel(context.Background())
	defer stopMonitor()
	s.monitor.CheckAll(ctx)
	// The background tasks feed shared state: engine health and load, the KV prefix
	// index, and the sweeping of idle affinity bindings. They stop after the drain.
	sub, err := kv.Subscribe(monCtx, s.plan, s.deps.KV, s.log)
	if err != nil {
		return fmt.Errorf("subscribing to KV events: %w", err)
	}
	var bg sync.WaitGroup
	bg.Go(func() { s.monitor.Run(monCtx) })
	bg.Go(func() { s.deps.Affinity.Run(monCtx) })
	defer func() { stopMonitor(); bg.Wait(); sub.Wait() }()

	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		// No WriteTimeout: it would cut long generation streams.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(newLimitListener(ln, s.plan.Limits.MaxConnections)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	grace := time.Duration(s.plan.ShutdownGraceSecs) * time.Second
	s.log.Info("shutting down: draining in-flight requests", "grace", grace)
	// The last part of the grace period is kept for cutting what is still running
	// cleanly: streams end with an error event and other requests with a 503, instead
	// of a dropped connection.
	final := min(grace/10, 2*time.Second)
	shutCtx, cancel := context.WithTimeout(context.Background(), grace-final)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		s.stopHard()
		s.active.waitIdle(final)
		_ = srv.Close()
		return fmt.Errorf("draining: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	s.log.Info("drained")
	return nil
}

// ready answers 200 when every model can be served: not draining and, per model, at
// least one healthy engine of each role its buckets need.
func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	if s.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	snap := s.reg.Snapshot()
	var missing []string
	for _, m := range s.plan.Models {
		for _, role := range modelRoles(s.plan, m.Name) {
			healthy := false
			for _, w := range snap.Workers(m.Name, role) {
				healthy = healthy || w.Healthy()
			}
			if !healthy {
				missing = append(missing, fmt.Sprintf("model %s has no healthy %s engine", m.Name, role))
			}
		}
	}
	if len(missing) > 0 {
		http.Error(w, strings.Join(missing, "\n"), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// modelRoles lists the roles of a model's engines: plain, or prefill and decode.
func modelRoles(p *plan.Plan, model string) []plan.Role {
	var roles []plan.Role
	for _, e := range p.Engines {
		if e.Model == model && !slices.Contains(roles, e.Role) {
			roles = append(roles, e.Role)
		}
	}
	return roles
}

// routes lists what the router serves, for the answer to a request it does not.
var routes = map[string]string{
	"/v1/chat/completions": http.MethodPost, "/v1/models": http.MethodGet, "/healthz": http.MethodGet,
	"/readyz": http.MethodGet, "/metrics": http.MethodGet, "/admin/state": http.MethodGet, "/admin/explain": http.MethodPost,
	"/v1/tokenize": http.MethodPost, "/tokenize": http.MethodPost, "/v1/detokenize": http.MethodPost, "/detokenize": http.MethodPost,
	"/v1/completions": http.MethodPost, "/generate": http.MethodPost, "/v1/embeddings": http.MethodPost, "/v1/rerank": http.MethodPost,
	"/v1/score": http.MethodPost, "/classify": http.MethodPost, "/v1/models/{id}": http.MethodGet, "/health": http.MethodGet,
	"/get_model_info": http.MethodGet, "/get_server_info": http.MethodGet,
}

// routeList is routes as "METHOD /path" phrases in path order, for the 404 answer.
var routeList = func() string {
	paths := slices.Sorted(maps.Keys(routes))
	for i, p := range paths {
		paths[i] = routes[p] + " " + p
	}
	return strings.Join(paths, ", ")
}()

// noRoute answers any other method or path with an OpenAI-shaped 405 or 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	if method, ok := routes[r.URL.Path]; ok {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, codeMethod, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
		return
	}
	writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no route %s %s: this router serves %s", r.Method, r.URL.Path, routeList))
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	data := make([]map[string]any, 0, len(s.plan.Models))
	for i := range s.plan.Models {
		data = append(data, s.modelCard(&s.plan.Models[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}
