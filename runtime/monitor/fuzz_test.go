package monitor

import (
	"encoding/json"
	"fmt"
	"reflect"
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
		// Corners where the scanner decoder of /v1/loads must match encoding/json.
		`{"LOADS": [{"Num_Running_Reqs": 1, "num_waiting_reqſ": 2, "dp_rank": null}], "timestamp": null}`,
		`{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 2, "num_running_reqs": null}]}`,
		`{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 2}], "loads": [null, {"num_running_reqs": 3, "num_waiting_reqs": 0}]}`,
		`{"loads": [{"num_running_reqs": 1.0, "num_waiting_reqs": 2}]}`,
		`{"loads": [{"num_running_reqs": 9223372036854775808, "num_waiting_reqs": 2}]}`,
		`{"loads": [{"num_\u0072unning_reqs": -0, "num_waiting_reqs": 2e0}]}`,
		`{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 2, "x": [{"y": "\"\\"}, true, false, -1.5e+3]}]} x`,
		`{"loads": [1, {"num_running_reqs": 1, "num_waiting_reqs": 2}]}`, `null`, `{"loads": {}}`,
		"{\"loads\": [{\"timestamp\": \"a\tb\", \"num_running_reqs\": 1, \"num_waiting_reqs\": 2}]}",
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
		s, err := parseLoads(data, at)
		check("loads", s, err)
		// The scanner decoder of /v1/loads agrees with encoding/json on every input.
		want, wantErr := parseLoadsReference(data, at)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("loads: scanner error %v, encoding/json error %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(s, want) {
			t.Fatalf("loads: scanner %+v, encoding/json %+v", s, want)
		}
		s, err = parseGetLoad(data, at)
		check("get_load", s, err)
		s, err = parseMetrics(data, at, 2)
		check("metrics", s, err)
	})
}

// parseLoadsReference is parseLoads as it was on encoding/json: the scanner decoder
// must accept, reject and read exactly what it does.
func parseLoadsReference(b []byte, at time.Time) ([]rankSample, error) {
	var body struct {
		Timestamp json.RawMessage `json:"timestamp"`
		Loads     []struct {
			Timestamp                json.RawMessage `json:"timestamp"`
			DPRank                   *int            `json:"dp_rank"`
			NumRunningReqs           *int64          `json:"num_running_reqs"`
			NumWaitingReqs           *int64          `json:"num_waiting_reqs"`
			NumWaitingUncachedTokens *int64          `json:"num_waiting_uncached_tokens"`
			NumUsedTokens            *int64          `json:"num_used_tokens"`
			NumTotalTokens           *int64          `json:"num_total_tokens"`
			MaxTotalNumTokens        *int64          `json:"max_total_num_tokens"`
			MaxRunningRequests       *int64          `json:"max_running_requests"`
		} `json:"loads"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, fmt.Errorf("decoding /v1/loads: %w", err)
	}
	if len(body.Loads) == 0 {
		return nil, fmt.Errorf("decoding /v1/loads: no loads")
	}
	out := make([]rankSample, 0, len(body.Loads))
	for i, l := range body.Loads {
		if l.NumRunningReqs == nil || l.NumWaitingReqs == nil {
			return nil, fmt.Errorf("decoding /v1/loads: rank %d lacks num_running_reqs or num_waiting_reqs", i)
		}
		s := rankSample{rank: orIndex(l.DPRank, i), stamp: string(l.Timestamp)}
		if s.stamp == "" {
			s.stamp = string(body.Timestamp)
		}
		s.At, s.Running, s.Waiting = at, *l.NumRunningReqs, *l.NumWaitingReqs
		if l.NumWaitingUncachedTokens != nil && l.NumUsedTokens != nil && l.MaxTotalNumTokens != nil && *l.MaxTotalNumTokens > 0 {
			s.Native = true
			s.WaitingUncachedTokens = *l.NumWaitingUncachedTokens
			s.UsedKVTokens = *l.NumUsedTokens
			// num_total_tokens is used plus pending prefill; older engines lack it.
			s.TotalKVTokens = s.UsedKVTokens + s.WaitingUncachedTokens
			if l.NumTotalTokens != nil {
				s.TotalKVTokens = *l.NumTotalTokens
			}
			s.MaxKVTokens = *l.MaxTotalNumTokens
			if l.MaxRunningRequests != nil {
				s.MaxRunning = *l.MaxRunningRequests
			}
		}
		out = append(out, s)
	}
	return out, nil
}
