package sim

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The benchmarks measure the simulator's own CPU cost, with time-scale 0 so that no step
// sleeps: run them with -cpu 1 to read the figures per core (client included).
// docs/benchmarks.md turns them into engines per core.

func benchEngine(b *testing.B) *Engine {
	cfg := DefaultConfig()
	cfg.TimeScale = 0
	cfg.OutputTokens = 32
	f, err := Start(context.Background(), []EngineSpec{{ID: "B", Model: "m", Config: cfg}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f.Engines()[0]
}

// benchBody is a 2-turn chat of about 250 prompt tokens.
var benchBody = `{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("You are a helpful assistant. ", 30) +
	`"},{"role":"user","content":"` + strings.Repeat("Summarise the news of the day. ", 10) + `"}]`

func benchPost(b *testing.B, url, body string) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := io.Copy(io.Discard, bufio.NewReader(resp.Body)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkChat is one non-streaming request of 32 output tokens, end to end.
func BenchmarkChat(b *testing.B) {
	e := benchEngine(b)
	url, body := e.URL()+"/v1/chat/completions", benchBody+"}"
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			benchPost(b, url, body)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// BenchmarkChatStream is one streaming request: 32 tokens, one SSE event each.
func BenchmarkChatStream(b *testing.B) {
	e := benchEngine(b)
	url, body := e.URL()+"/v1/chat/completions", benchBody+`,"stream":true}`
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			benchPost(b, url, body)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(32*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkModelDecodeStep is one decode step of a full batch of 32 requests, the
// scheduler's inner loop.
func BenchmarkModelDecodeStep(b *testing.B) {
	cfg := DefaultConfig()
	cfg.OutputTokens = 1 << 30
	cfg.KVCapacityTokens = 1 << 40
	m := newModel(cfg, true)
	for i := range 32 {
		m.enqueue(newRequest(prompt(uint32(i*1000), 256), nil, 1<<30, false))
	}
	m.finish(m.next())
	for b.Loop() {
		m.finish(m.next())
	}
}
