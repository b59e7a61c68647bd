package quality

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// EngineRequests returns how many requests each engine of the fleet has received, from
// the counter of its /metrics: how evenly a policy spread the work.
func (f *Fleet) EngineRequests() ([]int, error) {
	var out []int
	for _, e := range f.engines.Engines() {
		resp, err := http.Get(e.URL() + "/metrics")
		if err != nil {
			return nil, fmt.Errorf("engine metrics: %w", err)
		}
		n, err := requestsTotal(bufio.NewScanner(resp.Body))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("engine %s metrics: %w", e.ID(), err)
		}
		out = append(out, n)
	}
	return out, nil
}

// requestsTotal sums sglang:num_requests_total over an engine's ranks.
func requestsTotal(sc *bufio.Scanner) (int, error) {
	n, found := 0, false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sglang:num_requests_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("malformed num_requests_total: %w", err)
		}
		n, found = n+int(v), true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no num_requests_total")
	}
	return n, nil
}

// busiestShare is the busiest engine's share of the requests over the even share: 1 is a
// perfect spread, 4 (with four engines) all on one.
func busiestShare(counts []int) float64 {
	total, most := 0, 0
	for _, c := range counts {
		total, most = total+c, max(most, c)
	}
	if total == 0 {
		return 0
	}
	return float64(most) * float64(len(counts)) / float64(total)
}
