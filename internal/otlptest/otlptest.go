// Package otlptest is an OTLP trace collector for tests: a real gRPC server implementing
// the collector's TraceService and a real HTTP server taking POST /v1/traces
// (protobuf), both on 127.0.0.1, recording every span they receive. Tests check what the
// router exported against it, and the testscript command otlp-receiver runs it.
package otlptest

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is a received span with its ids in hex and its attributes as strings.
type Span struct {
	Service      string            `json:"service"`
	TraceID      string            `json:"trace_id"`
	SpanID       string            `json:"span_id"`
	ParentSpanID string            `json:"parent_span_id,omitempty"`
	Name         string            `json:"name"`
	Kind         string            `json:"kind"`
	Attributes   map[string]string `json:"attributes"`
	// StatusError reports the span's status code is Error.
	StatusError bool `json:"status_error,omitempty"`
}

// Receiver records the spans its servers receive.
type Receiver struct {
	mu    sync.Mutex
	spans []Span

	grpc     *grpc.Server
	http     *http.Server
	grpcAddr string
	httpAddr string
}

// maxBody bounds an HTTP export request: a test collector needs no more.
const maxBody = 16 << 20

// Start starts both servers on free ports of 127.0.0.1.
func Start() (*Receiver, error) {
	rc := &Receiver{}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for OTLP gRPC: %w", err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		return nil, fmt.Errorf("listening for OTLP HTTP: %w", err)
	}
	rc.grpcAddr, rc.httpAddr = gl.Addr().String(), hl.Addr().String()
	rc.grpc = grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(rc.grpc, traceService{rc: rc})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", rc.serveHTTP)
	rc.http = &http.Server{Handler: mux}
	go func() { _ = rc.grpc.Serve(gl) }()
	go func() { _ = rc.http.Serve(hl) }()
	return rc, nil
}

// GRPCAddr is the gRPC server's host:port.
func (rc *Receiver) GRPCAddr() string { return rc.grpcAddr }

// HTTPAddr is the HTTP server's host:port; it serves POST /v1/traces.
func (rc *Receiver) HTTPAddr() string { return rc.httpAddr }

// Close stops both servers.
func (rc *Receiver) Close() {
	rc.grpc.Stop()
	_ = rc.http.Close()
}

// Spans returns the spans received so far, in arrival order.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Span(nil), rc.spans...)
}

// Find returns the received spans of the trace with id traceID (hex), sorted by name.
func (rc *Receiver) Find(traceID string) []Span {
	var out []Span
	for _, s := range rc.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type traceService struct {
	collectorpb.UnimplementedTraceServiceServer
	rc *Receiver
}

func (s traceService) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	s.rc.record(req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (rc *Receiver) serveHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var req collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, "not an OTLP protobuf export: "+err.Error(), http.StatusBadRequest)
		return
	}
	rc.record(&req)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (rc *Receiver) record(req *collectorpb.ExportTraceServiceRequest) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				rc.spans = append(rc.spans, Span{
					Service: service, TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()), Name: sp.GetName(), Kind: kind(sp.GetKind()),
					Attributes: attrs(sp.GetAttributes()), StatusError: sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				})
			}
		}
	}
}

func kind(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	}
	return k.String()
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}
