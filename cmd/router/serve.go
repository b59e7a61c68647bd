package main

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/routerkit/router/compiler"
	"github.com/routerkit/router/runtime/gcpace"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/logsink"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/server"
	"github.com/routerkit/router/runtime/sim"
)

//go:embed demo/demo.yaml
var demoConfig []byte

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the HTTP router",
		Description: `Serves POST /v1/chat/completions (plain and prefill/decode), /v1/models,
/healthz, /readyz, /metrics, GET /admin/state and POST /admin/explain. With --demo it
runs an embedded config against simulated engines started in-process. SIGINT or SIGTERM
stops accepting, drains in-flight requests within shutdown_grace_secs, and exits 0.
--demo --print-config prints the demo config instead, a starting point for your own.
The config's auth block requires client keys, tls serves HTTPS, and metrics.listen
moves /metrics to an address of its own (docs/serve.md).
Every flag can also be set in the environment: ROUTER_CONFIG (files separated by
commas), ROUTER_LISTEN, ROUTER_DEMO, ROUTER_PRINT_CONFIG, ROUTER_LOG_FORMAT,
ROUTER_LOG_LEVEL, ROUTER_LOG_FLUSH, ROUTER_WATCH and ROUTER_WATCH_INTERVAL; a flag on
the command line wins. With shutdown_delay_secs, SIGTERM first makes /readyz answer 503
"draining" while serving goes on for that long, so load balancers stop sending before
the listener closes. --watch reloads the config when its files' content changes, as
SIGHUP does: a Kubernetes ConfigMap update reaches every pod without a signal.`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "config", Aliases: []string{"c"}, Usage: "config `FILE` (repeatable; files unify)", EnvVars: []string{"ROUTER_CONFIG"}},
			&cli.StringFlag{Name: "listen", Usage: "address to listen on, overriding the config's listen (`HOST:PORT`)", EnvVars: []string{"ROUTER_LISTEN"}},
			&cli.BoolFlag{Name: "demo", Usage: "serve the embedded demo config with simulated engines", EnvVars: []string{"ROUTER_DEMO"}},
			&cli.BoolFlag{Name: "print-config", Usage: "with --demo: print the embedded demo config and exit, to start a config of your own from it", EnvVars: []string{"ROUTER_PRINT_CONFIG"}},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log format: text or json", EnvVars: []string{"ROUTER_LOG_FORMAT"}},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log level: debug, info, warn or error", EnvVars: []string{"ROUTER_LOG_LEVEL"}},
			&cli.BoolFlag{Name: "watch", Usage: "reload when the content of a config file changes (Kubernetes ConfigMap updates included); a refused config keeps the running plan", EnvVars: []string{"ROUTER_WATCH"}},
			&cli.DurationFlag{Name: "watch-interval", Value: 2 * time.Second, Usage: "with --watch: how often the config files are read, from 100ms to 5m", EnvVars: []string{"ROUTER_WATCH_INTERVAL"}},
			&cli.DurationFlag{Name: "log-flush", Value: time.Second, Usage: "longest a request's log line waits in memory, batched with others (up to 64 KiB) into one write; 0 writes each line at once", EnvVars: []string{"ROUTER_LOG_FLUSH"}},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("print-config") {
				if !c.Bool("demo") || c.IsSet("config") {
					return usageError("--print-config prints the demo config: router serve --demo --print-config")
				}
				_, err := c.App.Writer.Write(demoConfig)
				return err
			}
			return serve(c)
		},
	}
}

func serve(c *cli.Context) error {
	files := c.StringSlice("config")
	demo := c.Bool("demo")
	if demo == (len(files) > 0) {
		return usageError("serve needs either --config FILE... or --demo")
	}
	watch, every := c.Bool("watch"), c.Duration("watch-interval")
	if watch && demo {
		return usageError("--watch reloads config files: use it with --config, not --demo")
	}
	if every < minWatchInterval || every > maxWatchInterval {
		return usageError("--watch-interval must be from %s to %s, got %s", minWatchInterval, maxWatchInterval, every)
	}
	logs, err := newLogs(c)
	if err != nil {
		return err
	}
	defer logs.sink.Close()
	log := logs.log
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var p *plan.Plan
	if demo {
		p, err = compiler.CompileSources([]compiler.Source{{Name: "demo.yaml", Data: demoConfig}})
		if err != nil {
			return fmt.Errorf("internal error: demo config: %w", err)
		}
		fleet, err := startDemoEngines(ctx, p)
		if err != nil {
			return err
		}
		defer fleet.Close()
	} else if p, err = compiler.Compile(files); err != nil {
		return err
	}
	listen := c.String("listen")
	if listen != "" {
		p.Listen = listen
	}
	opts := server.Options{Logger: log, RequestLog: logs.requests, CompileEngine: compileEngine, Settle: gcpace.Settle}
	if !demo {
		// A reload compiles the same files, with the same --listen, so that only what
		// the files changed counts as a change.
		opts.Reload = func() (*plan.Plan, error) {
			p, err := compiler.Compile(files)
			if err == nil && listen != "" {
				p.Listen = listen
			}
			return p, err
		}
	}
	srv, err := server.New(p, opts)
	if err != nil {
		return err
	}
	// The pacer starts once the tokenizers are loaded: with no live heap yet it would
	// let loading them grow the heap to five times what they keep alive at their peak.
	if gcpace.Start(ctx) {
		log.Debug("garbage collection paced for a small live heap; set GOGC to choose your own", "min_floor_bytes", gcpace.MinFloor, "max_floor_bytes", gcpace.MaxFloor)
	}
	// Registered before serving, so a SIGHUP never finds the default action (exit).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadOnSIGHUP(ctx, hup, srv, log)
	if watch {
		go watchConfig(ctx, files, every, func() { _, _ = srv.ReloadConfig() }, log)
	}
	ln, err := net.Listen("tcp", p.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (set listen in the config or --listen)", p.Listen, err)
	}
	stopMetrics, err := serveMetrics(ctx, srv, p, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer stopMetrics()
	announce(c, log, ln.Addr(), p)
	return srv.Serve(ctx, ln)
}

// serveMetrics serves /metrics on metrics.listen when the plan has one, until the
// returned stop is called: after the serving listener's drain, so the drain itself can
// be watched.
func serveMetrics(ctx context.Context, srv *server.Server, p *plan.Plan, log *slog.Logger) (stop func(), err error) {
	if p.Metrics == nil {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", p.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w (set metrics.listen in the config to a free address)", p.Metrics.Listen, err)
	}
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ServeMetrics(mctx, ln); err != nil {
			log.Error("the metrics listener stopped", "error", err)
		}
	}()
	log.Info("metrics listening", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { cancel(); <-done }, nil
}

// compileEngine validates an engine posted to POST /admin/engines as JSON.
func compileEngine(running *plan.Plan, data []byte) (plan.Engine, error) {
	return compiler.CompileEngine(running, compiler.Source{Name: "engine.json", Data: data})
}

// reloadOnSIGHUP reloads the configuration files on each SIGHUP until ctx is done. The
// outcome is logged: what changed, or every compiler error of a refused configuration.
func reloadOnSIGHUP(ctx context.Context, hup <-chan os.Signal, srv *server.Server, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			log.Info("SIGHUP: reloading the configuration")
			// Success and refusal are logged by the server, with what changed or why.
			_, _ = srv.ReloadConfig()
		}
	}
}

// startDemoEngines starts one simulated engine per demo engine on free ports (HTTP and
// KV events) and points the plan's engines at them.
func startDemoEngines(ctx context.Context, p *plan.Plan) (*sim.Fleet, error) {
	specs, err := sim.SpecsFromPlan(p, sim.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("demo engines: %w", err)
	}
	for i := range specs {
		specs[i].Addr = "" // any free port
	}
	fleet, err := sim.Start(context.WithoutCancel(ctx), specs)
	if err != nil {
		return nil, fmt.Errorf("demo engines: %w", err)
	}
	for i := range p.Engines {
		e := &p.Engines[i]
		se := fleet.Engine(e.ID)
		e.URL = se.URL()
		if e.KVEvents != nil {
			e.KVEvents.Endpoint, e.KVEvents.Topic = se.KVEndpoints()[0], se.KVTopic()
		}
	}
	return fleet, nil
}

func modelNames(p *plan.Plan) string {
	names := make([]string, len(p.Models))
	for i, m := range p.Models {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// logs are serve's loggers: one for request lines, which the sink batches, and one for
// everything else, written at once.
type logs struct {
	log, requests *slog.Logger
	sink          *logsink.Sink
}

func newLogs(c *cli.Context) (logs, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return logs{}, usageError("--log-level must be debug, info, warn or error, got %q", c.String("log-level"))
	}
	if c.Duration("log-flush") < 0 {
		return logs{}, usageError("--log-flush must not be negative, got %s", c.Duration("log-flush"))
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsStrings}
	sink := logsink.New(c.App.ErrWriter, logsink.DefaultBatch, c.Duration("log-flush"))
	l := logs{sink: sink}
	switch c.String("log-format") {
	case "text":
		l.log = slog.New(slog.NewTextHandler(sink, opts))
	case "json":
		l.log = slog.New(slog.NewJSONHandler(sink, opts))
	default:
		return logs{}, usageError("--log-format must be text or json, got %q", c.String("log-format"))
	}
	// The request lines, one per request, are formatted by logline: the same lines as
	// slog's handlers write, for a fraction of the cost.
	l.requests = slog.New(logline.New(sink.Batched(), c.String("log-format") == "json", opts))
	asDefault(l.log)
	return l, nil
}
