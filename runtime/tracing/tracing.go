// Package tracing exports the router's OpenTelemetry spans over OTLP: one server span per
// routed request, continuing the client's W3C traceparent, and one client span per engine
// request, whose context the engine receives as its traceparent.
//
// Export never gets in the way of serving: spans go through a batch processor with a
// bounded queue that drops when full, the exporter runs on the processor's goroutine
// with a timeout of its own, and its failures are logged (at most once a minute), never
// returned to a request.
//
// Selection code does not import this package: the HTTP edge (runtime/server) starts
// the server span, sets the decision the request already records as its attributes,
// and asks dispatch (its Outbound hook) to start an engine request's span.
package tracing

import (
	"context"

	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/routerkit/router/runtime/plan"
)

// Export bounds. The queue holds spans while the collector is slow or away; past it,
// spans are dropped rather than requests slowed.
const (
	queueSize     = 4096
	batchSize     = 512
	batchTimeout  = 2 * time.Second
	exportTimeout = 5 * time.Second
	// retryElapsed bounds how long one batch is retried against a failing collector.
	retryElapsed = 15 * time.Second
)

// Tracer starts the router's spans and exports them. A nil *Tracer is tracing off.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TraceContext
}

// New starts exporting to cfg's collector. The exporter connects lazily: an unreachable
// collector is no error here, only later export failures, logged to log.
func New(cfg plan.Tracing, log *slog.Logger) (*Tracer, error) {
	exp, err := exporter(cfg)
	if err != nil {
		return nil, err
	}
	otel.SetErrorHandler(newErrorLog(log, time.Now))
	res := resource.NewSchemaless(attribute.String("service.name", cfg.ServiceName))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(queueSize), sdktrace.WithMaxExportBatchSize(batchSize),
			sdktrace.WithBatchTimeout(batchTimeout), sdktrace.WithExportTimeout(exportTimeout)),
	)
	return &Tracer{provider: tp, tracer: tp.Tracer("github.com/routerkit/router")}, nil
}

// exporter builds cfg's OTLP exporter. An endpoint with a scheme is a URL (https://
// speaks TLS, http:// does not); a bare host:port is plaintext, as collectors in a
// cluster usually are.
func exporter(cfg plan.Tracing) (sdktrace.SpanExporter, error) {
	withURL := strings.Contains(cfg.Endpoint, "://")
	ctx := context.Background() // New connects lazily: nothing here waits on it
	var client otlptrace.Client
	switch cfg.Protocol {
	case plan.TracingGRPC, "":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithTimeout(exportTimeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: time.Second, MaxInterval: 5 * time.Second, MaxElapsedTime: retryElapsed})}
		if withURL {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		} else {
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint), otlptracegrpc.WithInsecure())
		}
		client = otlptracegrpc.NewClient(opts...)
	case plan.TracingHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(exportTimeout),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: time.Second, MaxInterval: 5 * time.Second, MaxElapsedTime: retryElapsed})}
		if withURL {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		} else {
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint), otlptracehttp.WithInsecure())
		}
		client = otlptracehttp.NewClient(opts...)
	default:
		return nil, fmt.Errorf("tracing protocol %q: use grpc or http", cfg.Protocol)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("starting the OTLP %s exporter to %s: %w", cfg.Protocol, cfg.Endpoint, err)
	}
	return exp, nil
}

// Shutdown exports the spans still queued and stops, within ctx: a collector that is
// away costs shutdown at most ctx's time.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("flushing spans: %w", err)
	}
	return nil
}

// Start starts r's server span, the child of the client's traceparent when it sent a
// valid one (an invalid traceparent or tracestate is ignored, as W3C Trace Context
// asks), and returns r with the span in its context.
func (t *Tracer) Start(r *http.Request) (*http.Request, trace.Span) {
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := t.tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", r.URL.Path)))
	return r.WithContext(ctx), span
}

// StartEngine starts the span of req, a request to engine for stage, as a child of the
// span in req's context, and sets req's traceparent (and tracestate) to it: the engine
// continues the router's trace, never a client's header passed through. The span ends
// when the response's body is closed, or with the round trip's error, provided req goes
// through Transport.
func (t *Tracer) StartEngine(req *http.Request, engine, stage string) *http.Request {
	ctx, _ := t.tracer.Start(req.Context(), "engine "+stage, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("router.engine", engine), attribute.String("router.stage", stage),
			attribute.String("server.address", req.URL.Host), attribute.String("url.path", req.URL.Path)))
	delete(req.Header, "Traceparent")
	delete(req.Header, "Tracestate")
	t.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return req.WithContext(ctx)
}

// Transport wraps rt so that it ends the engine spans StartEngine began: at the round
// trip's error, or when the response body is closed, with the status. Other requests
// (health polls, requests without an engine span) pass through untouched.
func (t *Tracer) Transport(rt http.RoundTripper) http.RoundTripper { return &transport{rt: rt} }

type transport struct{ rt http.RoundTripper }

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	span := trace.SpanFromContext(req.Context())
	if ro, ok := span.(sdktrace.ReadOnlySpan); !ok || ro.SpanKind() != trace.SpanKindClient || !ro.EndTime().IsZero() {
		return tr.rt.RoundTrip(req)
	}
	resp, err := tr.rt.RoundTrip(req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, resp.Status)
	}
	resp.Body = &endOnClose{ReadCloser: resp.Body, span: span}
	return resp, nil
}

// CloseIdleConnections passes on to the wrapped transport, as http.Client expects.
func (tr *transport) CloseIdleConnections() {
	if ci, ok := tr.rt.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// endOnClose ends an engine span when the response body is closed: a stream's span
// lasts as long as the stream.
type endOnClose struct {
	io.ReadCloser
	span trace.Span
	done atomic.Bool
}

func (b *endOnClose) Close() error {
	err := b.ReadCloser.Close()
	if b.done.CompareAndSwap(false, true) {
		b.span.End()
	}
	return err
}

// errorLog logs the OpenTelemetry SDK's errors (failed exports, dropped spans) at most
// once a minute: a collector that is away must not flood the router's log.
type errorLog struct {
	log     *slog.Logger
	now     func() time.Time
	last    atomic.Int64 // unix nanoseconds of the last line
	dropped atomic.Int64 // errors not logged since
}

func newErrorLog(log *slog.Logger, now func() time.Time) *errorLog {
	return &errorLog{log: log, now: now}
}

// logEvery is the least time between two logged export errors.
const logEvery = time.Minute

// Handle implements otel.ErrorHandler.
func (e *errorLog) Handle(err error) {
	now := e.now().UnixNano()
	last := e.last.Load()
	if last != 0 && now-last < int64(logEvery) || !e.last.CompareAndSwap(last, now) {
		e.dropped.Add(1)
		return
	}
	e.log.Warn("tracing: exporting spans failed; requests are served as usual, spans may be dropped (check tracing.endpoint and the collector)",
		"error", err, "errors_not_logged", e.dropped.Swap(0))
}
