package plan

// Tracing exports one span per routed request, with a child span per engine request, to
// an OpenTelemetry collector over OTLP (docs/serve.md, "Tracing and request ids").
type Tracing struct {
	// Endpoint is the collector: host:port for gRPC, a URL (http:// or https://,
	// optionally with a path) or host:port for HTTP.
	Endpoint string `json:"endpoint"`
	// Protocol is TracingGRPC or TracingHTTP.
	Protocol string `json:"protocol"`
	// SampleRatio is the share of new traces recorded, 0 to 1; a request carrying a
	// traceparent follows its caller's sampling decision.
	SampleRatio float64 `json:"sample_ratio"`
	// ServiceName is the service.name resource attribute of the router's spans.
	ServiceName string `json:"service_name"`
}

// OTLP protocols of Tracing.Protocol.
const (
	TracingGRPC = "grpc"
	TracingHTTP = "http"
)

// RequestID says where a request's id comes from: the first of Headers the client sent,
// else a new one.
type RequestID struct {
	// Headers are the header names read in order (lower case, as configured).
	Headers []string `json:"headers"`
}

// Debug holds opt-in answers that help an operator and leak topology to clients.
type Debug struct {
	// EngineHeader adds X-Router-Engine to routed responses, naming the engine(s).
	EngineHeader bool `json:"engine_header"`
}
