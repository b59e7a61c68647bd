package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/runtime/plan"
)

// BenchmarkPrefixSourceHits is a small routing-quality measurement of the prefix sources
// through `router serve` against three simulated engines: eight documents, each the
// system prompt of eight conversations, sent one at a time with the documents
// interleaved. It reports the share of prompt tokens the engines served from their cache
// (usage.prompt_tokens_details.cached_tokens), and how many times a document's pages were
// computed, 8 being once per document. Each iteration starts cold engines. Run it with
//
//	go test ./runtime/server -run '^$' -bench PrefixSourceHits -benchtime 3x
func BenchmarkPrefixSourceHits(b *testing.B) {
	for _, tt := range []struct {
		name string
		kv   bool
		src  *plan.PrefixSource
	}{
		{"power_of_two", false, nil},
		{"approximate", false, &plan.PrefixSource{Type: "approximate", CapacityTokens: 500_000, TTLSecs: 120, BlockSize: 16}},
		{"local_index", true, &plan.PrefixSource{Type: "local_index"}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var cached, prompt, computed int64
			for b.Loop() {
				c, p, n := prefixWorkload(b, tt.kv, tt.src)
				cached, prompt, computed = cached+c, prompt+p, computed+n
			}
			b.ReportMetric(100*float64(cached)/float64(prompt), "cached%")
			b.ReportMetric(float64(computed)/float64(b.N), "doc-computes/op")
		})
	}
}

// prefixWorkload runs the workload on a fresh fleet and returns the cached and prompt
// tokens the engines reported and how many requests found their document uncached.
func prefixWorkload(b *testing.B, events bool, src *plan.PrefixSource) (cached, prompt, computed int64) {
	engines := []plan.Engine{plainEngine("E1"), plainEngine("E2"), plainEngine("E3")}
	g := group(plan.PowerOfTwo, plan.Admission{})
	if src != nil {
		g = approxGroup()
		g.Policy.PrefixSource = src
	}
	if events {
		for i := range engines {
			engines[i].KVEvents = &plan.KVEvents{Endpoint: "tcp://127.0.0.1:0"}
		}
	}
	fc := startScaledFleet(b, testPlan(engines, plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &g}}}}), 0)
	defer fc.stop()
	c := fc.client()
	for q := range 8 {
		for d := range 8 {
			system := fmt.Sprintf("Document %d. ", d)
			for i := range 40 {
				system += fmt.Sprintf("Clause %d.%d of the agreement binds both parties. ", d, i)
			}
			got, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m", MaxTokens: openai.Int(1),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(fmt.Sprintf("Question %d about document %d?", q, d))}})
			if err != nil {
				b.Fatal(err)
			}
			u := got.Usage
			cached, prompt = cached+u.PromptTokensDetails.CachedTokens, prompt+u.PromptTokens
			if u.PromptTokensDetails.CachedTokens < 128 {
				computed++
			}
		}
	}
	return cached, prompt, computed
}
