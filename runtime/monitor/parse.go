package monitor

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/routerkit/router/runtime/state/load"
)

// rankSample is one data-parallel rank's sample as an engine reported it.
type rankSample struct {
	rank int
	// stamp is the engine's own timestamp of the rank's report, as raw JSON, or "" when
	// it gives none. A stamp that does not change between polls means a frozen report.
	stamp string
	load.Sample
}

// parseLoads decodes SGLang's GET /v1/loads. A rank is native when it carries the waiting
// uncached tokens and a KV capacity; otherwise it is basic (running and waiting only).
// Unknown fields are ignored so newer engines keep working.
func parseLoads(r io.Reader, at time.Time) ([]rankSample, error) {
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
	if err := json.NewDecoder(r).Decode(&body); err != nil {
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

// parseGetLoad decodes SGLang's older GET /get_load: an array with one object per rank,
// where num_reqs counts running and waiting requests together. These reports are basic.
func parseGetLoad(r io.Reader, at time.Time) ([]rankSample, error) {
	var ranks []struct {
		TsTic          json.RawMessage `json:"ts_tic"`
		DPRank         *int            `json:"dp_rank"`
		NumReqs        *int64          `json:"num_reqs"`
		NumWaitingReqs *int64          `json:"num_waiting_reqs"`
	}
	if err := json.NewDecoder(r).Decode(&ranks); err != nil {
		return nil, fmt.Errorf("decoding /get_load: %w", err)
	}
	if len(ranks) == 0 {
		return nil, fmt.Errorf("decoding /get_load: no ranks")
	}
	out := make([]rankSample, 0, len(ranks))
	for i, l := range ranks {
		if l.NumReqs == nil || l.NumWaitingReqs == nil {
			return nil, fmt.Errorf("decoding /get_load: rank %d lacks num_reqs or num_waiting_reqs", i)
		}
		s := rankSample{rank: orIndex(l.DPRank, i), stamp: string(l.TsTic)}
		s.At, s.Running, s.Waiting = at, max(*l.NumReqs-*l.NumWaitingReqs, 0), *l.NumWaitingReqs
		out = append(out, s)
	}
	return out, nil
}

// Gauge names read from a Prometheus exposition, SGLang's first and vLLM's second.
var (
	runningGauges = []string{"sglang:num_running_reqs", "vllm:num_requests_running"}
	waitingGauges = []string{"sglang:num_queue_reqs", "vllm:num_requests_waiting"}
)

// parseMetrics reads running and waiting requests from GET /metrics. Series labelled
// dp_rank become that rank's sample; unlabelled series describe the whole engine and
// become rank 0, with the engine's other ranks reported empty so the sum stays right.
// Metrics reports are basic: the exposition has no waiting-uncached-token gauge.
func parseMetrics(r io.Reader, at time.Time, dpSize int) ([]rankSample, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("decoding /metrics: %w", err)
	}
	running, okR := sumByRank(fams, runningGauges)
	waiting, okW := sumByRank(fams, waitingGauges)
	if !okR || !okW {
		return nil, fmt.Errorf("decoding /metrics: no running/waiting gauges (want sglang:num_running_reqs and sglang:num_queue_reqs, or vllm:num_requests_running and vllm:num_requests_waiting)")
	}
	out := make([]rankSample, max(dpSize, 1))
	for i := range out {
		out[i] = rankSample{rank: i}
		out[i].At = at
	}
	for rank, v := range running {
		if rank < len(out) {
			out[rank].Running = int64(v)
		}
	}
	for rank, v := range waiting {
		if rank < len(out) {
			out[rank].Waiting = int64(v)
		}
	}
	return out, nil
}

// sumByRank sums the first gauge family present among names per dp_rank label (rank 0
// when unlabelled).
func sumByRank(fams map[string]*dto.MetricFamily, names []string) (map[int]float64, bool) {
	for _, name := range names {
		fam, ok := fams[name]
		if !ok {
			continue
		}
		sums := map[int]float64{}
		for _, m := range fam.GetMetric() {
			rank := 0
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "dp_rank" {
					if n, err := strconv.Atoi(lp.GetValue()); err == nil {
						rank = n
					}
				}
			}
			sums[rank] += m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
		return sums, true
	}
	return nil, false
}

func orIndex(rank *int, i int) int {
	if rank != nil {
		return *rank
	}
	return i
}
