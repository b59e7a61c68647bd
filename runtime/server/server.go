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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/edge/certs"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/h1"
	"github.com/routerkit/router/runtime/monitor"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/rawtcp"
	"github.com/routerkit/router/runtime/request"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/tracing"
)

// Options are the server's injectable parts; zero values give production defaults.
type Options struct {
	// Transport carries requests to engines; nil uses a pooled transport sized for a
	// router (many idle connections per engine).
	Transport http.RoundTripper
	Logger    *slog.Logger
	// RequestLog writes the one line per request; nil uses Logger. `router serve` gives
	// it a handler whose lines are batched (runtime/logsink).
	RequestLog *slog.Logger
	// Rand is the policies' randomness; nil uses a lock-free process-wide source.
	Rand policy.Rand
	// RecentDecisions is how many decisions /admin/state keeps (default 64).
	RecentDecisions int
	// Clock is the circuit breakers' time source; nil means time.Now.
	Clock func() time.Time
	// Reload compiles the configuration files again, for POST /admin/reload and
	// ReloadConfig (SIGHUP); nil refuses reloads.
	Reload func() (*plan.Plan, error)
	// CompileEngine validates one engine posted to POST /admin/engines against the running
	// plan and fills its defaults, as the compiler does for the config's engines
	// (compiler.CompileEngine); nil refuses posted engines.
	CompileEngine func(running *plan.Plan, data []byte) (plan.Engine, error)
	// Settle runs after New and each applied reload have loaded the models' tokenizers;
	// `router serve` returns the garbage of loading them to the operating system
	// (gcpace.Settle), which would otherwise stay resident for minutes. nil does nothing.
	Settle func()
}

// Server is the router: what New returns and what outlives a plan. It holds the engines
// (registry, load table, breakers, prefix indexes and bindings through the policy state,
// health monitor, KV-event subscriptions), metrics, the recent decisions and the request
// limits, and the current generation. A reload or a membership change keeps it and
// changes what it holds engine by engine; its methods act on the router as a whole.
type Server struct {
	reg      *engine.Registry
	table    *load.Table
	monitor  *monitor.Monitor
	metrics  *metrics
	recent   *recent
	client   *http.Client
	log      *slog.Logger
	reqLog   slog.Handler
	started  time.Time
	draining atomic.Bool
	// loopbackOnly is whether Serve's listener is reachable from this host alone; until
	// Serve says so, admin writes without admin_token are refused (admin).
	loopbackOnly atomic.Bool
	opts         Options
	// active caps concurrent chat requests (limits.max_concurrent_requests) and lets
	// shutdown wait for their final words.
	active *activeSet
	// hardStop is cancelled, with dispatch.ErrHardStop as its cause, when the shutdown grace
	// period runs out: every dispatch still running ends, a stream with an error event.
	// It is the base of every request's context (http.Server.BaseContext), so a
	// dispatch learns of it from its own context, without registering on a context that
	// all requests share.
	hardStop context.Context
	stopHard context.CancelCauseFunc

	// gen is the generation new requests are served by; each request loads it once.
	gen atomic.Pointer[generation]
	// fleet holds the engines' membership and serialises its changes and reloads.
	fleet fleet
	// dns runs the plan's engines_from_dns sources while the router serves.
	dns dnsRunner
	// tracer exports the requests' spans (runtime/tracing); nil when tracing is off.
	tracer *tracing.Tracer
}

// generation is one configuration generation of the router: the per-plan parts (models
// with their resolvers, policies and tokenizers, timeouts, headers, retries, routes). A
// reload or membership change builds a new generation and swaps it in atomically; a
// request runs on the generation it started with to its end. It embeds the router it
// belongs to, because a request's path reads both at every step (the registry and load
// table beside its plan's models and timeouts): the embedded *Server is the one
// router, shared by every generation, never a copy. The router's own methods reach a
// generation through current().
type generation struct {
	*Server
	plan   *plan.Plan
	models *request.Models
	deps   policy.Deps
	number uint64
	// routes are this generation's HTTP routes; Handler serves the current generation's.
	routes     http.Handler
	dispatcher *dispatch.Dispatcher
	timeouts   dispatch.Timeouts
	edge       edge
}

// New builds a router from a compiled plan.
func New(p *plan.Plan, opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RequestLog == nil {
		opts.RequestLog = opts.Logger
	}
	tos := dispatch.TimeoutsOf(p.Timeouts)
	// Polling has connections of its own (monitor.New with a nil client) unless a
	// test injects the transport, which then carries polls too.
	injected := opts.Transport != nil
	engineTLS, err := certs.Engine(p.EngineTLS)
	if err != nil {
		return nil, fmt.Errorf("engine_tls: %w", err)
	}
	if !injected {
		opts.Transport = dispatch.NewTransport(tos, p.EngineTransport, engineTLS)
	}
	if opts.RecentDecisions <= 0 {
		opts.RecentDecisions = 64
	}
	reg, err := engine.FromPlan(p.Engines)
	if err != nil {
		return nil, fmt.Errorf("building worker registry: %w", err)
	}
	c := &Server{
		reg: reg, table: load.NewTable(p.Engines, nil), log: opts.Logger, reqLog: opts.RequestLog.Handler(), opts: opts,
		// An engine's redirect is an answer to report, never to follow.
		client: &http.Client{Transport: opts.Transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		recent:  newRecent(opts.RecentDecisions),
		metrics: newMetrics(planModels(p)),
		started: time.Now(),
		active:  newActiveSet(p),
	}
	if c.tracer, err = newTracer(p, c); err != nil {
		return nil, err
	}
	if c.tracer != nil {
		c.client.Transport = c.tracer.Transport(c.client.Transport)
	}
	c.hardStop, c.stopHard = context.WithCancelCause(context.Background())
	c.fleet.init(c.Members)
	for _, e := range p.Engines {
		if reg.Get(e.ID).Target() == nil {
			return nil, fmt.Errorf("engine %s: url %q does not parse", e.ID, plan.RedactURL(e.URL))
		}
		reg.Get(e.ID).SetBreaker(newBreaker(p.Breaker, opts.Clock))
		c.fleet.members[e.ID] = &member{engine: e, worker: reg.Get(e.ID), origin: control.OriginConfig}
		c.fleet.order = append(c.fleet.order, e.ID)
	}
	deps, err := policy.NewDeps(p, c.table, opts.Rand, nil)
	if err != nil {
		return nil, fmt.Errorf("building policy state: %w", err)
	}
	g, err := c.newGeneration(p, deps, 1)
	if err != nil {
		return nil, err
	}
	var pollClient *http.Client
	if injected {
		pollClient = c.client
	}
	c.monitor = monitor.New(p, reg, c.table, pollClient, c.log)
	c.monitor.EngineTLS = engineTLS
	for _, e := range p.Engines {
		c.metrics.registerEngine(c, c.fleet.members[e.ID])
	}
	c.metrics.zeroSeries(p)
	c.metrics.reg.MustRegister(newBindingsCollector(c), &tokenCacheCollector{router: c}) // the binding store's health and the token caches
	g.deps.Affinity.SetLogger(c.log)
	if g.deps.KV != nil {
		// The prefix index counts what it could not use of the engines' KV events.
		c.metrics.reg.MustRegister(g.deps.KV)
	}
	c.fleet.republish()
	c.metrics.reg.MustRegister(c.fleet.metrics, dnsCollector{c}, newGatewayCollector(c))
	c.metrics.reg.MustRegister(c.active.metrics.collectors()...)
	c.monitor.OnChange(c.capacityChanged)
	c.gen.Store(g)
	c.settle()
	return c, nil
}

// settle runs opts.Settle, if any.
func (c *Server) settle() {
	if c.opts.Settle != nil {
		c.opts.Settle()
	}
}

// generation builds the per-plan parts of a router over c, changing nothing c holds, so
// a generation that fails to build leaves the running one whole.
func (c *Server) newGeneration(p *plan.Plan, deps policy.Deps, n uint64) (*generation, error) {
	models, err := request.NewModels(p, c.reg, deps)
	if err != nil {
		return nil, err
	}
	edge, err := newEdge(p)
	if err != nil {
		return nil, err
	}
	s := &generation{
		Server: c, plan: p, models: models, deps: deps, number: n,
		timeouts:   dispatch.TimeoutsOf(p.Timeouts),
		dispatcher: dispatch.New(p, c.client, c.table, deps, c.log),
		edge:       edge,
	}
	s.dispatcher.Outbound = c.outbound()
	s.routes = s.withEdge(s.buildRoutes())
	return s, nil
}

// current returns the generation new requests are served by.
func (c *Server) current() *generation { return c.gen.Load() }

func planModels(p *plan.Plan) []string {
	names := make([]string, len(p.Models))
	for i, m := range p.Models {
		names[i] = m.Name
	}
	return names
}

// Handler returns the router's HTTP routes. Each request is served by the generation
// current when it arrives, to its end, whatever reloads happen meanwhile.
func (c *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A request with a Transfer-Encoding may also have carried a Content-Length, which
		// net/http removes before the handler sees it: the peers in front of the router may
		// have framed the body by the other header, and the bytes after it be a smuggled
		// request. RFC 9112 §6.3 asks a server that answers such a message to close the
		// connection after the answer, so every request with a Transfer-Encoding gets its
		// connection closed (clients of the router send a Content-Length).
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		c.current().routes.ServeHTTP(w, r)
	})
}

func (s *generation) buildRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.routed(s.models.Chat))
	mux.HandleFunc("POST /v1/completions", s.routed(s.models.Completion))
	mux.HandleFunc("POST /generate", s.routed(s.models.Generate))
	mux.HandleFunc("POST /v1/embeddings", s.routed(s.models.Inputs(request.Embeddings)))
	mux.HandleFunc("POST /v1/rerank", s.routed(s.models.Inputs(request.Rerank)))
	mux.HandleFunc("POST /v1/score", s.routed(s.models.Inputs(request.Score)))
	classify := s.routed(s.models.Inputs(request.Classify))
	mux.HandleFunc("POST /classify", classify)
	// SMG's paths of the same endpoints (control.SMGRoutes): the engines are sent the
	// router's own.
	mux.HandleFunc("POST /v1/classify", pathAs("/classify", classify))
	mux.HandleFunc("POST /rerank", pathAs("/v1/rerank", s.routed(s.models.Inputs(request.Rerank))))
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/{id}", s.getModel)
	mux.HandleFunc("GET /get_model_info", s.engineInfo)
	mux.HandleFunc("GET /get_server_info", s.engineInfo)
	for _, prefix := range []string{"/v1", ""} {
		mux.HandleFunc("POST "+prefix+"/tokenize", s.tokenizer(s.models.Tokenize))
		mux.HandleFunc("POST "+prefix+"/detokenize", s.tokenizer(func(_ *http.Request, body []byte) (map[string]any, *request.Error) {
			return s.models.Detokenize(body)
		}))
	}
	for _, path := range []string{"GET /healthz", "GET /health", "GET /liveness"} {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	}
	mux.HandleFunc("GET /readyz", s.ready)
	mux.HandleFunc("GET /readiness", s.ready)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("GET /admin/state", control.Guard(s, control.StateHandler(s)))
	control.Routes(mux, s)
	control.SMGRoutes(mux, s)
	mux.HandleFunc("/", s.noRoute)
	return mux
}

// Serve checks engine health once, then serves on ln until ctx is done. It then reports
// not-ready, keeps serving for the plan's shutdown delay, stops accepting, lets in-flight
// requests finish within the plan's grace period and returns nil after a clean drain.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.loopbackOnly.Store(control.LoopbackOnly(ln.Addr()))
	if !s.loopbackOnly.Load() && s.current().plan.AdminToken == "" {
		s.log.Warn("admin writes refused: the router listens beyond loopback without admin_token; set admin_token to add, drain or remove engines, reload or explain over HTTP",
			"listen", ln.Addr().String())
	}
	defer s.stopTracing() // last: after the drain, so the last requests' spans go too
	s.warnOpen(ln)
	monCtx, stopMonitor := context.WithCancel(context.Background())
	defer stopMonitor()
	s.monitor.CheckAll(ctx)
	// The background tasks feed shared state: engine health and load, the KV prefix
	// index, and the sweeping of idle affinity bindings. They follow reloads and
	// membership changes, and stop after the drain.
	if err := s.startFleet(monCtx); err != nil {
		return fmt.Errorf("subscribing to KV events: %w", err)
	}
	var bg sync.WaitGroup
	bg.Go(func() { s.monitor.Run(monCtx) })
	defer func() { stopMonitor(); bg.Wait(); s.waitFleet() }()
	// Discovery finds its engines before the router accepts requests, and stops when
	// shutdown starts: a draining router takes no new engines.
	s.startDNS(monCtx, s.current().plan.EnginesFromDNS)
	defer s.stopDNS()

	limits := s.current().plan.Limits
	// Client connections read and write with raw system calls, which do not wake sysmon
	// (see rawtcp).
	cl := newClientListener(rawtcp.Listener(ln), limits.MaxConnections, limits.MaxConnectionsPerClient)
	srv := s.clientServer(cl.ConnState)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.tlsListener(cl)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	s.delayShutdown()
	s.stopDNS()
	grace := time.Duration(s.current().plan.ShutdownGraceSecs) * time.Second
	s.log.Info("shutting down: draining in-flight requests", "grace", grace)
	// The last part of the grace period is kept for cutting what is still running
	// cleanly: streams end with an error event and other requests with a 503, instead
	// of a dropped connection.
	final := min(grace/10, 2*time.Second)
	shutCtx, cancel := context.WithTimeout(context.Background(), grace-final)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		s.stopHard(dispatch.ErrHardStop)
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

// clientServer is what serves HTTP to the router's clients: http.Server, or h1.Server.
type clientServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// clientServer builds the plan's server of clients (client_transport): the router's own
// HTTP/1.1 server, or net/http's, which also serves edge TLS (it negotiates HTTP/2).
// Both have the same settings; connState is the connection caps' hook.
func (s *Server) clientServer(connState func(net.Conn, http.ConnState)) clientServer {
	p := s.current().plan
	base := func(net.Listener) context.Context { return s.hardStop }
	errorLog := slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	const readHeader, idle = 10 * time.Second, 120 * time.Second
	if p.ClientTransport == plan.ClientTransportNetHTTP || s.current().edge.tls != nil {
		// No WriteTimeout: it would cut long generation streams.
		return &http.Server{Handler: s.Handler(), BaseContext: base, ReadHeaderTimeout: readHeader, IdleTimeout: idle,
			ConnState: connState, ErrorLog: errorLog}
	}
	return &h1.Server{Handler: s.Handler(), BaseContext: base, ReadHeaderTimeout: readHeader, IdleTimeout: idle,
		ConnState: connState, ErrorLog: errorLog}
}

// routes lists what the router serves, for the answer to a request it does not.
var routes = map[string]string{
	"/v1/chat/completions": http.MethodPost, "/v1/models": http.MethodGet, "/healthz": http.MethodGet,
	"/readyz": http.MethodGet, "/metrics": http.MethodGet, "/admin/state": http.MethodGet, "/admin/explain": http.MethodPost,
	"/v1/tokenize": http.MethodPost, "/tokenize": http.MethodPost, "/v1/detokenize": http.MethodPost, "/detokenize": http.MethodPost,
	"/v1/completions": http.MethodPost, "/generate": http.MethodPost, "/v1/embeddings": http.MethodPost, "/v1/rerank": http.MethodPost,
	"/v1/score": http.MethodPost, "/classify": http.MethodPost, "/v1/models/{id}": http.MethodGet, "/health": http.MethodGet,
	"/get_model_info": http.MethodGet, "/get_server_info": http.MethodGet,
	"/admin/reload": http.MethodPost, "/admin/engines": http.MethodPost,
	"/liveness": http.MethodGet, "/readiness": http.MethodGet, "/health_generate": http.MethodGet, "/v1/classify": http.MethodPost,
	"/rerank": http.MethodPost, "/workers": "GET, POST", "/get_loads": http.MethodGet, "/flush_cache": http.MethodPost,
}

// pathAs serves h as if the request had come to path, the router's name of an endpoint
// another API names otherwise; the engine is sent path.
func pathAs(path string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = path, ""
		h(w, r2)
	}
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
func (s *generation) noRoute(w http.ResponseWriter, r *http.Request) {
	if method, ok := routes[r.URL.Path]; ok {
		w.Header().Set("Allow", method)
		answer.Write(w, http.StatusMethodNotAllowed, answer.CodeMethod, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method))
		return
	}
	answer.Write(w, http.StatusNotFound, answer.CodeNotFound, fmt.Sprintf("no route %s %s: this router serves %s", r.Method, r.URL.Path, routeList))
}

func (s *generation) listModels(w http.ResponseWriter, _ *http.Request) {
	data := make([]map[string]any, 0, len(s.plan.Models))
	for i := range s.plan.Models {
		data = append(data, s.modelCard(&s.plan.Models[i]))
	}
	answer.JSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}
