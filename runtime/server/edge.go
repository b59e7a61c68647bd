package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/edge/apikey"
	"github.com/routerkit/router/runtime/edge/certs"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/reqid"
)

// edge is a generation's gateway, built from its plan when the generation is: the client
// keys, the serving listener's TLS configuration, where routed requests' ids come from
// and whether responses name their engines. A reload reads the key file and the
// certificate files again; files that no longer load fail the reload, and the running
// generation, with its keys and certificate, stays.
type edge struct {
	keys *apikey.Set // nil: no client authentication
	tls  *tls.Config // nil: plain HTTP
	// configHash is router_config_hash's label: a short digest of the plan as configured.
	configHash   string
	ids          *reqid.Reader
	engineHeader bool
}

func newEdge(p *plan.Plan) (edge, error) {
	e := edge{configHash: configHash(p), ids: reqid.NewReader(p.RequestID.Headers), engineHeader: p.Debug.EngineHeader}
	if p.Auth != nil {
		e.keys = apikey.New(p.Auth)
	}
	if p.TLS != nil {
		c, err := certs.Server(p.TLS)
		if err != nil {
			return edge{}, fmt.Errorf("tls: %w", err)
		}
		e.tls = c
	}
	return e, nil
}

// withEdge wraps a generation's routes in its gateway: the client keys, and, when /metrics
// has a listener of its own, a 404 for /metrics on the serving one, so a public port
// does not show the fleet.
func (g *generation) withEdge(h http.Handler) http.Handler {
	if g.plan.Metrics != nil {
		routes := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/metrics" {
				answer.Write(w, http.StatusNotFound, answer.CodeNotFound, "/metrics is served on metrics.listen ("+g.plan.Metrics.Listen+"), not on the serving address")
				return
			}
			routes.ServeHTTP(w, r)
		})
	}
	if g.edge.keys != nil {
		h = apikey.Require(g.edge.keys, h)
	}
	return h
}

// tlsListener is ln with TLS when the plan terminates it. Each handshake takes the
// certificate of the generation current at that moment, so a reload changes it for new
// connections and drops none. It wraps the capped listener: a handshake holds a
// connection slot, and http.Server bounds it by ReadHeaderTimeout.
func (s *Server) tlsListener(ln net.Listener) net.Listener {
	if s.current().edge.tls == nil {
		return ln
	}
	return tls.NewListener(ln, certs.Listener(func() *tls.Config { return s.current().edge.tls }))
}

// warnOpen warns when the router serves beyond loopback with no client keys: whoever
// reaches the port can use the engines.
func (s *Server) warnOpen(ln net.Listener) {
	if !control.LoopbackOnly(ln.Addr()) && s.current().plan.Auth == nil {
		s.log.Warn("no client authentication: the router listens beyond loopback without auth, so whoever reaches it can use the engines; set auth.api_keys_file, or listen on 127.0.0.1 behind a proxy that authenticates",
			"listen", ln.Addr().String())
	}
}

// configHash is a short SHA-256 of p's canonical JSON (encoding/json: fields in
// declaration order, maps sorted) without its secrets: the admin token and engine URL
// credentials are redacted, and client keys are in the plan as their redacted digests
// already. Replicas serving the same configuration show the same hash.
func configHash(p *plan.Plan) string {
	q := *p
	if q.AdminToken != "" {
		q.AdminToken = "(redacted)"
	}
	q.Engines = make([]plan.Engine, len(p.Engines))
	for i, e := range p.Engines {
		e.URL = plan.RedactURL(e.URL)
		q.Engines[i] = e
	}
	data, err := json.Marshal(&q)
	if err != nil {
		return "unknown" // a plan is plain data: it always encodes
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// gatewayCollector exports router_build_info, constant, and router_config_hash, the
// hash of the configuration the current generation was built from.
type gatewayCollector struct {
	c     *Server
	build prometheus.Metric
	hash  *prometheus.Desc
}

func newGatewayCollector(c *Server) *gatewayCollector {
	version, revision := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	return &gatewayCollector{c: c,
		build: prometheus.MustNewConstMetric(prometheus.NewDesc("router_build_info",
			"1, labelled with the router's module version, VCS revision and Go version.",
			[]string{"version", "revision", "goversion"}, nil), prometheus.GaugeValue, 1, version, revision, runtime.Version()),
		hash: prometheus.NewDesc("router_config_hash",
			"1, labelled with a short SHA-256 of the running configuration (secrets excluded); replicas whose hashes differ run different configurations.",
			[]string{"hash"}, nil),
	}
}

func (g *gatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.build.Desc()
	ch <- g.hash
}

func (g *gatewayCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- g.build
	ch <- prometheus.MustNewConstMetric(g.hash, prometheus.GaugeValue, 1, g.c.current().edge.configHash)
}

// Limits of the metrics listener: it answers scrapers, a few connections that send one
// small GET each.
const (
	metricsMaxConns       = 64
	metricsMaxHeaderBytes = 16 << 10
	metricsTimeout        = 10 * time.Second
)

// ServeMetrics serves GET /metrics alone on ln (metrics.listen) until ctx is done. It
// has no admin or client-key guard: put it on an address scrapers alone reach.
func (s *Server) ServeMetrics(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		answer.Write(w, http.StatusNotFound, answer.CodeNotFound, "this listener serves GET /metrics only")
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: metricsTimeout,
		ReadTimeout:       metricsTimeout,
		WriteTimeout:      metricsTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    metricsMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(netutil.LimitListener(ln, metricsMaxConns)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving metrics: %w", err)
	case <-ctx.Done():
	}
	_ = srv.Close()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving metrics: %w", err)
	}
	return nil
}
