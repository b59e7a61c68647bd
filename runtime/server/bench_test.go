package server

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// BenchmarkOverhead sends the same chat requests straight to one simulated engine and
// through the router to that engine, at several concurrency levels, and reports latency
// percentiles and throughput of each. The simulator does not sleep (time scale 0), so the
// difference between the two is the router's added latency. Run it with
//
//	go test ./runtime/server -run '^$' -bench Overhead -benchtime 2000x
func BenchmarkOverhead(b *testing.B) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.PowerOfTwo, plan.Admission{MaxInflightRequests: 1 << 20}))}},
	}})
	fc := startScaledFleet(b, p, 0)
	body := chat("m", "Benchmark the router with a short prompt.", `, "max_tokens": 1`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	for _, target := range []struct{ name, url string }{
		{"direct", p.Engines[0].URL},
		{"routed", fc.url},
	} {
		for _, conc := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/c%d", target.name, conc), func(b *testing.B) {
				lat := make([]time.Duration, b.N)
				var next sync.Mutex
				i := 0
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for range conc {
					wg.Go(func() {
						for {
							next.Lock()
							n := i
							i++
							next.Unlock()
							if n >= b.N {
								return
							}
							t0 := time.Now()
							resp, err := client.Post(target.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
							if err != nil {
								b.Error(err)
								return
							}
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							if resp.StatusCode != 200 {
								b.Errorf("status %d", resp.StatusCode)
								return
							}
							lat[n] = time.Since(t0)
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			})
		}
	}
}
