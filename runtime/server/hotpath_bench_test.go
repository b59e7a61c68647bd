package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/internal/otlptest"
	"github.com/routerkit/router/runtime/logline"
	"github.com/routerkit/router/runtime/logsink"
	"github.com/routerkit/router/runtime/plan"
)

// BenchmarkHotPath drives the router's real handler over loopback HTTP against one
// simulated engine at time scale 0, beside a bare httputil.ReverseProxy to the same
// engine in the same process, so a CPU profile or -benchmem shows what the router adds
// per request. The router logs each request at info in text to io.Discard, through the
// request-line handler and batching sink `router serve` uses. Run it with
//
//	go test ./runtime/server -run '^$' -bench HotPath -benchmem -o /tmp/server.test -cpuprofile /tmp/cpu.out
//
// allocs/op counts the client's, the proxy's and the engine's allocations: the
// difference between the router's and the bare proxy's is the router's own, and
// router_traced's over router's is what tracing every request (tracing, sample_ratio 1,
// to an in-process OTLP receiver) adds. router_qwen3 is the router with Qwen3's tokenizer
// and cache_aware over two engines that publish KV events: its excess over router is the
// chat template, the real tokenizer, block hashing and the KV events' indexing.
func BenchmarkHotPath(b *testing.B) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{MaxInflightRequests: 1 << 20}))}},
	}})
	p.Engines[0].Load.IntervalMS = 1000
	p.Health.IntervalMS = 1000
	fleet := startSims(b, p, 0)
	p.Engines[0].URL = fleet.Engine("E1").URL()

	// The request lines are batched and formatted as `router serve` does them.
	sink := logsink.New(io.Discard, logsink.DefaultBatch, time.Second)
	defer sink.Close()
	srv, err := New(p, Options{Logger: slog.New(slog.NewTextHandler(sink, nil)), RequestLog: slog.New(logline.New(sink.Batched(), false, nil))})
	if err != nil {
		b.Fatal(err)
	}
	routerURL := serveOn(b, func(ln net.Listener, ctx context.Context) error { return srv.Serve(ctx, ln) })
	bareURL := serveOn(b, func(ln net.Listener, ctx context.Context) error { return serveBare(ctx, ln, p.Engines[0].URL) })
	// The same router exporting every request's spans to an in-process OTLP receiver.
	rc, err := otlptest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	traced := clone(p)
	traced.Tracing = &plan.Tracing{Endpoint: rc.GRPCAddr(), Protocol: plan.TracingGRPC, SampleRatio: 1, ServiceName: "router"}
	tsrv, err := New(traced, Options{Logger: slog.New(slog.NewTextHandler(sink, nil)), RequestLog: slog.New(logline.New(sink.Batched(), false, nil))})
	if err != nil {
		b.Fatal(err)
	}
	tracedURL := serveOn(b, func(ln net.Listener, ctx context.Context) error { return tsrv.Serve(ctx, ln) })
	// A router as deployments configure it: Qwen3's tokenizer and chat template, and
	// cache_aware over two engines whose KV events it indexes.
	qp := qwenPlan()
	startPlanSims(b, qp, 0)
	qwen := serveWith(b, qp, Options{RequestLog: slog.New(logline.New(sink.Batched(), false, nil))}, nil)

	bodies := map[string]string{
		"json":   `{"model":"m","messages":[{"role":"user","content":"Benchmark the router with a short prompt."}],"max_tokens":1}`,
		"stream": `{"model":"m","messages":[{"role":"user","content":"Benchmark the router with a short prompt."}],"max_tokens":16,"stream":true}`,
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	for _, kind := range []string{"json", "stream"} {
		for _, target := range []struct{ name, url string }{{"bare", bareURL}, {"router", routerURL}, {"router_traced", tracedURL}, {"router_qwen3", qwen.url}} {
			b.Run(fmt.Sprintf("%s/%s", kind, target.name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						resp, err := client.Post(target.url+"/v1/chat/completions", "application/json", strings.NewReader(bodies[kind]))
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				})
			})
		}
	}
}

// serveOn serves on a free loopback port until the benchmark ends and returns the URL.
func serveOn(b *testing.B, serve func(net.Listener, context.Context) error) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = serve(ln, ctx) }()
	b.Cleanup(func() { cancel(); ln.Close(); <-done })
	return "http://" + ln.Addr().String()
}

// serveBare is bench/proxy's baseline: a bare ReverseProxy with a pooled transport that
// reads each body whole before forwarding it.
func serveBare(ctx context.Context, ln net.Listener, upstream string) error {
	target, err := url.Parse(upstream)
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, Transport: tr, FlushInterval: -1}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 32<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rp.ServeHTTP(w, r)
	})}
	var wg sync.WaitGroup
	wg.Go(func() { <-ctx.Done(); _ = hs.Close() })
	err = hs.Serve(ln)
	wg.Wait()
	return err
}
