package quality

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/sim"
)

// OverloadWorkload is the name of the overload workload: bursts larger than the fleet's
// admission capacity, against a router whose queue lets the excess wait (issue #26).
const OverloadWorkload = "overload"

// overloadInflight is the admission cap per engine (max_inflight_requests), so the fleet's
// capacity is overloadInflight times the engines.
const overloadInflight = 2

// OverloadRow is one burst's outcome.
type OverloadRow struct {
	// Burst is how many requests were sent at once; Capacity the fleet's admission
	// capacity and QueueSize queue.size.
	Burst, Capacity, QueueSize int
	// Statuses counts the answers by HTTP status; Lost the requests that got no answer.
	Statuses map[int]int
	Lost     int
	// WaitP50 and WaitP90 are estimated from router_queue_wait_seconds' buckets (linear
	// within a bucket, as PromQL's histogram_quantile); WaitMean is exact (sum / count).
	WaitP50, WaitP90, WaitMean time.Duration
	Waited                     int
}

// RunOverload sends two bursts, each on a fresh fleet: one that fits capacity plus the
// queue (every request must be served), one half a queue beyond it (the excess is
// answered 429 at once).
func RunOverload(ctx context.Context, o Options) ([]OverloadRow, error) {
	capacity := overloadInflight * o.Engines
	size := 8 * o.Engines
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxIdleConns: 512}, Timeout: 5 * time.Minute}
	defer client.CloseIdleConnections()
	g := newGen(o.Shape, o.Seed)
	var rows []OverloadRow
	for _, burst := range []int{capacity + size, capacity + size + size/2} {
		if err := ctx.Err(); err != nil {
			return rows, err
		}
		f, err := startFleet(ctx, OverloadWorkload, overloadConfig(o.Engines, size), 1, func(string) sim.Config { return EngineConfig(o.TimeScale) })
		if err != nil {
			return rows, err
		}
		start := time.Now()
		row := OverloadRow{Burst: burst, Capacity: capacity, QueueSize: size, Statuses: map[int]int{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range burst {
			r := Request{Messages: []Message{{Role: "user", Content: g.text(o.Shape.QuestionWords * 5)}}, MaxTokens: o.Shape.OutputTokens}
			wg.Go(func() {
				status := sendStatus(ctx, client, f.URL, &r)
				mu.Lock()
				defer mu.Unlock()
				if status == 0 {
					row.Lost++
				} else {
					row.Statuses[status]++
				}
			})
		}
		wg.Wait()
		err = row.readWaits(f.URL)
		client.CloseIdleConnections()
		f.Close()
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%-16s burst %-17d %v, %d lost, queue wait p50 %s p90 %s ms, %s\n",
				OverloadWorkload, burst, row.Statuses, row.Lost, ms(row.WaitP50), ms(row.WaitP90), time.Since(start).Round(100*time.Millisecond))
		}
	}
	return rows, nil
}

// overloadConfig is the router config of the overload workload: n engines behind a
// load_based group with an admission cap, and a queue of size requests.
func overloadConfig(n, size int) []byte {
	var b strings.Builder
	b.WriteString("engines:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: E%d, url: \"http://127.0.0.1:%d\", model: m, role: plain}\n", i+1, i+1)
	}
	fmt.Fprintf(&b, "models:\n  m:\n    buckets:\n      - id: all\n        limits: {min: 0}\n        groups:\n          plain:\n            policy: {type: load_based, admission: {max_inflight_requests: %d}}\n", overloadInflight)
	fmt.Fprintf(&b, "queue: {size: %d, timeout_ms: 120000}\n", size)
	return []byte(b.String())
}

// sendStatus sends one request and returns its status once the answer is read whole, 0
// when it got none.
func sendStatus(ctx context.Context, client *http.Client, url string, r *Request) int {
	data := fmt.Sprintf(`{"model": "m", "max_tokens": %d, "messages": [{"role": "user", "content": %q}]}`, r.MaxTokens, r.Messages[0].Content)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(data))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0
	}
	return resp.StatusCode
}

var waitBucket = regexp.MustCompile(`^router_queue_wait_seconds_bucket\{model="m",le="([^"]+)"\} (\d+)$`)

// readWaits reads the queue wait histogram from the router's /metrics.
func (r *OverloadRow) readWaits(url string) error {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return fmt.Errorf("router metrics: %w", err)
	}
	defer resp.Body.Close()
	var bounds []float64
	var counts []float64
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if m := waitBucket.FindStringSubmatch(line); m != nil {
			le, _ := strconv.ParseFloat(m[1], 64) // "+Inf" parses as +Inf
			n, _ := strconv.ParseFloat(m[2], 64)
			bounds, counts = append(bounds, le), append(counts, n)
		} else if v, ok := strings.CutPrefix(line, `router_queue_wait_seconds_sum{model="m"} `); ok {
			sum, _ = strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("router metrics: %w", err)
	}
	if len(counts) == 0 {
		return errors.New("router metrics: no router_queue_wait_seconds histogram")
	}
	total := counts[len(counts)-1]
	r.Waited = int(total)
	if total == 0 {
		return nil
	}
	r.WaitMean = seconds(sum / total)
	r.WaitP50, r.WaitP90 = seconds(quantile(0.5, bounds, counts)), seconds(quantile(0.9, bounds, counts))
	return nil
}

// quantile estimates the q-quantile of a cumulative histogram as PromQL's
// histogram_quantile does: linearly within the bucket it falls in.
func quantile(q float64, bounds, counts []float64) float64 {
	rank := q * counts[len(counts)-1]
	i, _ := slices.BinarySearch(counts, rank)
	i = min(i, len(counts)-1)
	if math.IsInf(bounds[i], 1) {
		return bounds[max(i-1, 0)]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = bounds[i-1], counts[i-1]
	}
	if counts[i] == below {
		return bounds[i]
	}
	return lower + (bounds[i]-lower)*(rank-below)/(counts[i]-below)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// WriteOverloadTable writes the overload workload's rows as a Markdown table.
func WriteOverloadTable(w io.Writer, rows []OverloadRow) error {
	if len(rows) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "Overload workload: bursts sent at once to %d engines admitting %d requests each (capacity %d), queue.size %d.\n\n"+
		"| burst | 200 | 429 | 408 | other | lost | waited | queue wait p50 ms | p90 ms | mean ms |\n|---|---|---|---|---|---|---|---|---|---|\n",
		rows[0].Capacity/overloadInflight, overloadInflight, rows[0].Capacity, rows[0].QueueSize)
	if err != nil {
		return err
	}
	for _, r := range rows {
		other := 0
		for status, n := range r.Statuses {
			if status != http.StatusOK && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout {
				other += n
			}
		}
		if _, err := fmt.Fprintf(w, "| %d | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n", r.Burst, r.Statuses[http.StatusOK],
			r.Statuses[http.StatusTooManyRequests], r.Statuses[http.StatusRequestTimeout], other, r.Lost, r.Waited,
			ms(r.WaitP50), ms(r.WaitP90), ms(r.WaitMean)); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintln(w, "\nQueue wait percentiles are estimated from router_queue_wait_seconds' buckets (linear within a bucket, as histogram_quantile); the mean is exact.")
	return err
}
