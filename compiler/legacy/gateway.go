package legacy

import (
	"fmt"
	"math"
	"net"
	"strconv"
)

// The classic router's and SMG's gateway flags: client keys, TLS, engine mTLS, a separate
// metrics listener, concurrency with its queue and token bucket, tracing and request-id
// headers (issue #26). Each maps to the configuration block of the gateway feature that
// enforces it (docs/migrate.md, Gateway), under the names the features share.

// gatewayArgs are the gateway flags of a parsed command line; nil when not given.
type gatewayArgs struct {
	apiKey                *string
	tlsCert, tlsKey       *string
	clientCert, clientKey *string
	caCerts               []string
	promHost              *string
	promPort              *int64
	maxConcurrent         *int64
	queueSize             *int64
	queueTimeoutSecs      *int64
	rateLimit             *int64
	enableTrace           bool
	otlpEndpoint          *string
	requestIDHeaders      []string
}

// SMG's defaults for the flags whose absence still configures something
// (smg model_gateway/src/main.rs CliArgs).
const (
	smgPrometheusHost   = "0.0.0.0"
	smgPrometheusPort   = 29000
	smgQueueSize        = 100
	smgQueueTimeoutSecs = 60
	smgOTLPEndpoint     = "localhost:4317"
)

// gatewayFlags are the gateway flags, bound to the fields of c.
func (c *cli) gatewayFlags() []flagSpec {
	g := &c.gateway
	return []flagSpec{
		{name: "--api-key", arity: oneValue, set: text(&g.apiKey)},
		{name: "--tls-cert-path", arity: oneValue, set: text(&g.tlsCert)},
		{name: "--tls-key-path", arity: oneValue, set: text(&g.tlsKey)},
		{name: "--client-cert-path", arity: oneValue, set: text(&g.clientCert)},
		{name: "--client-key-path", arity: oneValue, set: text(&g.clientKey)},
		{name: "--ca-cert-paths", arity: someValues, repeat: true, set: texts(&g.caCerts)},
		{name: "--prometheus-host", arity: oneValue, set: text(&g.promHost)},
		{name: "--prometheus-port", arity: oneValue, set: portNumber(&g.promPort)},
		{name: "--max-concurrent-requests", arity: oneValue, set: signed(&g.maxConcurrent)},
		{name: "--queue-size", arity: oneValue, set: count(&g.queueSize)},
		{name: "--queue-timeout-secs", arity: oneValue, set: count(&g.queueTimeoutSecs)},
		{name: "--rate-limit-tokens-per-second", arity: oneValue, set: signed(&g.rateLimit)},
		{name: "--enable-trace", arity: switchFlag, set: switchOn(&g.enableTrace)},
		{name: "--otlp-traces-endpoint", arity: oneValue, set: text(&g.otlpEndpoint)},
		{name: "--request-id-headers", arity: someValues, repeat: true, set: texts(&g.requestIDHeaders)},
	}
}

// limited reports whether SMG limited concurrency: --max-concurrent-requests N, N > 0
// (app_context.rs maybe_rate_limiter: N <= 0 builds no limiter).
func (g *gatewayArgs) limited() bool {
	return g.maxConcurrent != nil && *g.maxConcurrent > 0
}

// gatewayRules checks the gateway flags as SMG did, and refuses what it ignored: a flag that
// changed nothing there would be dropped silently here.
func (c *cli) gatewayRules(p *Errors) {
	g := &c.gateway
	p.check(g.apiKey == nil || *g.apiKey != "", "--api-key must not be empty")
	p.check((g.tlsCert == nil) == (g.tlsKey == nil), "--tls-cert-path and --tls-key-path go together: SMG serves TLS with both, give both or neither")
	p.check((g.clientCert == nil) == (g.clientKey == nil), "--client-cert-path and --client-key-path go together: the client certificate presented to engines needs its key, give both or neither")
	if !g.limited() {
		for _, f := range []struct {
			flag string
			set  bool
		}{{"--queue-size", g.queueSize != nil}, {"--queue-timeout-secs", g.queueTimeoutSecs != nil}, {"--rate-limit-tokens-per-second", g.rateLimit != nil}} {
			p.check(!f.set, "%s has no effect without --max-concurrent-requests N, N > 0 (SMG builds no limiter, queue or token bucket then): remove it, or add the limit", f.flag)
		}
	}
	if g.maxConcurrent != nil && *g.maxConcurrent > 0 {
		p.check(g.queueTimeoutSecs == nil || (*g.queueTimeoutSecs >= 1 && *g.queueTimeoutSecs <= math.MaxInt64/1000),
			"--queue-timeout-secs must be at least 1: the queue's timeout_ms is positive (use --queue-size 0 to answer at once instead of queueing)")
	}
	p.check(g.otlpEndpoint == nil || g.enableTrace, "--otlp-traces-endpoint has no effect without --enable-trace (SMG does not trace then): add --enable-trace, or remove it")
	for _, h := range g.requestIDHeaders {
		p.check(validHeaderName(h), "--request-id-headers %q is not a valid HTTP header name", h)
	}
	if g.promHost != nil {
		_, _, err := net.SplitHostPort(net.JoinHostPort(*g.promHost, "0"))
		p.check(err == nil && *g.promHost != "", "--prometheus-host %q is not a host name or IP address", *g.promHost)
	}
}

// gateway sets the gateway blocks the command line asks for.
func (t *translator) gateway(root *node) {
	g := &t.c.gateway
	if g.apiKey != nil {
		root.child("auth").set("api_keys", []string{*g.apiKey},
			"--api-key; the key is now written in this file: prefer api_keys_file, a mounted secret re-read on reload")
	}
	if g.tlsCert != nil {
		tls := root.child("tls")
		tls.set("cert_file", *g.tlsCert, "--tls-cert-path")
		tls.set("key_file", *g.tlsKey, "--tls-key-path")
	}
	if g.clientCert != nil || len(g.caCerts) > 0 {
		e := root.child("engine_tls")
		if len(g.caCerts) > 0 {
			e.set("ca_files", g.caCerts, "--ca-cert-paths")
		}
		setGiven(e, "cert_file", g.clientCert, "--client-cert-path")
		setGiven(e, "key_file", g.clientKey, "--client-key-path")
	}
	if g.promHost != nil || g.promPort != nil {
		host, port, from := smgPrometheusHost, int64(smgPrometheusPort), "--prometheus-host and --prometheus-port"
		switch {
		case g.promHost == nil:
			port, from = *g.promPort, "--prometheus-port with SMG's default --prometheus-host 0.0.0.0"
		case g.promPort == nil:
			host, from = *g.promHost, "--prometheus-host with SMG's default --prometheus-port 29000"
		default:
			host, port = *g.promHost, *g.promPort
		}
		root.child("metrics").set("listen", net.JoinHostPort(host, strconv.FormatInt(port, 10)), from)
	}
	if g.limited() {
		root.child("limits").set("max_concurrent_requests", *g.maxConcurrent, "--max-concurrent-requests")
		setQueue(root, g.queueSize, "--queue-size", "SMG's default --queue-size 100 with --max-concurrent-requests",
			g.queueTimeoutSecs, "--queue-timeout-secs", "SMG's default --queue-timeout-secs 60")
		if g.rateLimit != nil && *g.rateLimit > 0 {
			r := root.child("rate_limit")
			r.set("requests_per_second", *g.rateLimit, "--rate-limit-tokens-per-second")
			r.set("burst", *g.maxConcurrent, "--max-concurrent-requests: SMG's token bucket holds that many tokens")
		}
	}
	if g.enableTrace {
		tr := root.child("tracing")
		endpoint, from := smgOTLPEndpoint, "--enable-trace with SMG's default --otlp-traces-endpoint"
		if g.otlpEndpoint != nil {
			endpoint, from = *g.otlpEndpoint, "--otlp-traces-endpoint"
		}
		tr.set("endpoint", endpoint, from)
		tr.set("protocol", "grpc", "SMG exports OTLP over gRPC")
	}
	if len(g.requestIDHeaders) > 0 {
		root.child("request_id").set("headers", g.requestIDHeaders, "--request-id-headers")
	}
}

// gatewayNotes say what of the gateway flags behaves differently here.
func gatewayNotes(c *cli) []string {
	g := &c.gateway
	var out []string
	if g.apiKey != nil {
		out = append(out, "SMG also sent --api-key to its workers as their bearer key; the router forwards the client's Authorization header, which carries that same key, so engines started with --api-key keep working (list authorization in headers.deny to stop it).")
	}
	if g.promHost == nil && g.promPort == nil && c.dialect == DialectClassic {
		out = append(out, "SMG served Prometheus metrics on a separate listener, 0.0.0.0:29000 by default; the router serves /metrics on its listen address unless metrics.listen is set: add metrics: {listen: \"0.0.0.0:29000\"} to keep scraping that port.")
	}
	if g.limited() {
		out = append(out, "A request over the concurrency limit waits in a FIFO queue per model for up to queue.timeout_ms, as in SMG; a full queue is answered 429 with Retry-After, and a queued request re-runs engine selection when capacity frees.")
	}
	if g.limited() && g.rateLimit == nil {
		out = append(out, "Without --rate-limit-tokens-per-second SMG's token bucket did not refill: --max-concurrent-requests bounded standing concurrency alone, as limits.max_concurrent_requests does; no rate_limit is written.")
	}
	return out
}

// signed parses an integer that may be negative (SMG's i32 flags, where -1 disables).
func signed(p **int64) setter {
	return func(flag string, vs []string) error {
		n, err := strconv.ParseInt(vs[0], 10, 32)
		if err != nil {
			return fmt.Errorf("invalid value %q for %s: not an integer (SMG reads a 32-bit one)", vs[0], flag)
		}
		*p = &n
		return nil
	}
}

// portNumber parses a 16-bit port number.
func portNumber(p **int64) setter {
	return func(flag string, vs []string) error {
		n, err := strconv.ParseUint(vs[0], 10, 16)
		if err != nil {
			return fmt.Errorf("invalid value %q for %s: not a port number (0-65535)", vs[0], flag)
		}
		v := int64(n)
		*p = &v
		return nil
	}
}

// setQueue writes the queue block of SMG's queue flags (the global queue's or the prefill
// queue's), naming SMG's default where a flag is absent.
func setQueue(root *node, size *int64, sizeFlag, sizeDefault string, secs *int64, secsFlag, secsDefault string) {
	q := root.child("queue")
	n, from := int64(smgQueueSize), sizeDefault
	if size != nil {
		n, from = *size, sizeFlag
	}
	q.set("size", n, from)
	t, from := int64(smgQueueTimeoutSecs), secsDefault
	if secs != nil {
		t, from = *secs, secsFlag
	}
	q.set("timeout_ms", t*1000, from)
}
