package server

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/tracing"
)

// newTracer starts the plan's span export, nil when tracing is off.
func newTracer(p *plan.Plan, c *Server) (*tracing.Tracer, error) {
	if p.Tracing == nil {
		return nil, nil
	}
	return tracing.New(*p.Tracing, c.log)
}

// tracingShutdownGrace bounds the flush of queued spans when the router stops: a
// collector that is away must not hold the exit up.
const tracingShutdownGrace = 5 * time.Second

// stopTracing flushes the spans still queued, once serving has stopped.
func (c *Server) stopTracing() {
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownGrace)
	defer cancel()
	if err := c.tracer.Shutdown(ctx); err != nil {
		c.log.Warn("tracing: spans still queued at shutdown were not exported", "error", err)
	}
}

// outbound is dispatch's Outbound hook when tracing is on: each engine request gets
// its span and the traceparent naming it.
func (c *Server) outbound() func(*http.Request, *engine.Worker) *http.Request {
	if c.tracer == nil {
		return nil
	}
	return func(req *http.Request, w *engine.Worker) *http.Request {
		return c.tracer.StartEngine(req, w.ID(), string(w.Role()))
	}
}

// startSpan starts the routed request's span, which continues the client's
// traceparent, and records its trace id in the decision; r is returned with the span in
// its context, so the engine requests' spans are its children.
func (s *generation) startSpan(r *http.Request, rec *recorder, d *record) *http.Request {
	if s.tracer == nil {
		return r
	}
	r, rec.span = s.tracer.Start(r)
	if sc := rec.span.SpanContext(); sc.IsValid() {
		d.TraceID = sc.TraceID().String()
	}
	rec.span.SetAttributes(attribute.String("router.request_id", rec.reqID))
	return r
}

// endSpan ends a routed request's span with what its decision recorded: the model,
// bucket, each stage's engine, policy and reason, the cached prefix the pick was made
// for, the bucket attempts and dispatch retries, and the outcome. A 5xx (or a stream
// that failed after its 200) is an error span.
func endSpan(span trace.Span, d *record) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 10+3*d.npicked)
		attrs = append(attrs, attribute.String("router.model", d.Model), attribute.Int64("router.input_tokens", d.InputTokens),
			attribute.Int("router.bucket_attempts", d.Fallthroughs+1), attribute.Int("router.retries", d.Retries),
			attribute.Int("http.response.status_code", d.Status), attribute.Int64("router.generation", int64(d.Generation)))
		if d.Bucket != "" {
			attrs = append(attrs, attribute.String("router.bucket", d.Bucket))
		}
		for _, p := range d.picks() {
			attrs = append(attrs, attribute.String("router.engine."+p.stage, p.engine),
				attribute.String("router.policy."+p.stage, p.policy), attribute.String("router.reason."+p.stage, p.reason))
			if p.policy == string(plan.CacheAware) {
				attrs = append(attrs, attribute.Int64("router.prefix_match_tokens", p.prefixTokens))
			}
		}
		if d.Error != "" {
			attrs = append(attrs, attribute.String("router.error", d.Error))
		}
		span.SetAttributes(attrs...)
		if d.Status >= 500 || (d.Status == http.StatusOK && d.Error != "") {
			span.SetStatus(codes.Error, d.Error)
		}
	}
	span.End()
}
