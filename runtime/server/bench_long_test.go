package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/gcpace"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// BenchmarkLongPrompt sends a conversation of about 128k tokens straight to a simulated
// engine and through the router, one request at a time, the same body every time: the
// history has been seen before, so the router decodes it and looks its messages up in
// the token cache. The simulator does not sleep. Each iteration sends one request each
// way; added-p50-ms is the median of the pairs' differences, what the router adds.
// `standin` counts tokens with the stand-in vocabulary (longChat, 885 kB); `qwen3`
// renders Qwen3's chat template and tokenizes with its tokenizer (proseChat, 133k Qwen
// tokens of English prose, 619 kB), as the engine does too. Run it with
//
//	go test ./runtime/server -run '^$' -bench LongPrompt -benchtime 200x
func BenchmarkLongPrompt(b *testing.B) {
	// Collections paced as `router serve` paces them (the engines, in this process, are
	// paced alike on both paths).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go gcpace.New().Run(ctx, gcpace.DefaultInterval)
	b.Run("standin", func(b *testing.B) { benchLongPrompt(b, nil, longChat(128<<10)) })
	b.Run("qwen3", func(b *testing.B) { benchLongPrompt(b, qwenPlan().Models[0].Tokenizer, proseChat(b, 128<<10)) })
}

// benchLongPrompt runs BenchmarkLongPrompt for a model with tok (nil: the stand-in).
func benchLongPrompt(b *testing.B, tok *plan.Tokenizer, body []byte) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Tokenizer: tok, Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.PowerOfTwo, plan.Admission{}))}},
	}})
	cfg := sim.DefaultConfig()
	cfg.TimeScale, cfg.ContextLength, cfg.KVCapacityTokens = 0, 256<<10, 512<<10
	fleet := startSimsWith(b, p, cfg)
	p.Engines[0].URL = fleet.Engine("E1").URL()
	fc := serveUnrecorded(b, p)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func(url string) time.Duration {
		t0 := time.Now()
		resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d: %s", resp.StatusCode, msg)
		}
		return time.Since(t0)
	}
	b.SetBytes(int64(len(body)))
	var direct, routed, added []time.Duration
	for i := 0; b.Loop(); i++ {
		// Pairs, in alternating order, so that load from other processes falls on both.
		var d, r time.Duration
		if i%2 == 0 {
			d, r = send(p.Engines[0].URL), send(fc.url)
		} else {
			r, d = send(fc.url), send(p.Engines[0].URL)
		}
		direct, routed, added = append(direct, d), append(routed, r), append(added, r-d)
	}
	for _, m := range []struct {
		unit string
		lat  []time.Duration
	}{{"direct-p50-ms", direct}, {"routed-p50-ms", routed}, {"added-p50-ms", added}} {
		slices.Sort(m.lat)
		b.ReportMetric(float64(m.lat[len(m.lat)/2].Microseconds())/1000, m.unit)
	}
}
