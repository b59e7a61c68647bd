package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
)

// BenchmarkLongPrompt sends a conversation of about 128k tokens (885 kB of body, the
// stand-in vocabulary) straight to a simulated engine and through the router, one request
// at a time, the same body every time: the history has been seen before, so the router
// decodes it and looks its messages up in the token cache. The simulator does not sleep;
// the difference between the two p50s is what the router adds. Run it with
//
//	go test ./runtime/server -run '^$' -bench LongPrompt -benchtime 200x
func BenchmarkLongPrompt(b *testing.B) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.PowerOfTwo, plan.Admission{}))}},
	}})
	cfg := sim.DefaultConfig()
	cfg.TimeScale, cfg.ContextLength, cfg.KVCapacityTokens = 0, 256<<10, 512<<10
	specs, err := sim.SpecsFromPlan(p, cfg)
	if err != nil {
		b.Fatal(err)
	}
	specs[0].Addr = ""
	fleet, err := sim.Start(context.Background(), specs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fleet.Close() })
	p.Engines[0].URL = fleet.Engine("E1").URL()
	fc := serveRouter(b, p, Options{})
	body := longChat(128 << 10)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, target := range []struct{ name, url string }{
		{"direct", p.Engines[0].URL},
		{"routed", fc.url},
	} {
		b.Run(target.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				resp, err := client.Post(target.url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
