package monitor

import (
	"bytes"
	"testing"
	"time"
)

// FuzzLoadReports feeds the three load-report parsers the same bytes: none panics, and
// a report they accept has one sample per rank with a non-negative rank.
func FuzzLoadReports(f *testing.F) {
	for _, s := range []string{
		`{"timestamp": 1.5, "loads": [{"dp_rank": 0, "num_running_reqs": 2, "num_waiting_reqs": 1, "num_waiting_uncached_tokens": 10, "num_used_tokens": 5, "max_total_num_tokens": 100}]}`,
		`[{"dp_rank": 0, "num_reqs": 3, "num_waiting_reqs": 1, "num_tokens": 9, "ts_tic": 4}]`,
		"sglang:num_running_reqs{dp_rank=\"0\"} 2\nsglang:num_queue_reqs{dp_rank=\"0\"} 1\n",
		"vllm:num_requests_running{engine=\"1\"} 3\nvllm:num_requests_waiting{engine=\"1\"} 0\n",
		`{"loads": []}`, `[]`, "# HELP x\n",
	} {
		f.Add([]byte(s))
	}
	at := time.Unix(1000, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(name string, samples []rankSample, err error) {
			if err != nil {
				return
			}
			for _, s := range samples {
				if s.rank < 0 || !s.At.Equal(at) {
					t.Fatalf("%s: sample %+v", name, s)
				}
			}
		}
		s, err := parseLoads(bytes.NewReader(data), at)
		check("loads", s, err)
		s, err = parseGetLoad(bytes.NewReader(data), at)
		check("get_load", s, err)
		s, err = parseMetrics(bytes.NewReader(data), at, 2)
		check("metrics", s, err)
	})
}
