package monitor

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Gauge names read from a Prometheus exposition, SGLang's first and vLLM's second. vLLM
// renamed gpu_cache_usage_perc to kv_cache_usage_perc; older engines have only the first.
var (
	runningGauges = []string{"sglang:num_running_reqs", "vllm:num_requests_running"}
	waitingGauges = []string{"sglang:num_queue_reqs", "vllm:num_requests_waiting"}
	usageGauges   = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}
)

// cacheInfo is vLLM's info metric whose labels describe the KV cache; its block_size and
// num_gpu_blocks give the capacity in tokens.
const cacheInfo = "vllm:cache_config_info"

// rankLabels name a series' data-parallel rank: SGLang labels dp_rank, vLLM labels each
// DP engine core of one server "engine" (vllm/v1/metrics/loggers.py).
var rankLabels = []string{"dp_rank", "engine"}

// parseMetrics reads running and waiting requests from GET /metrics, and for vLLM the KV
// usage (a fraction) and capacity, which make max_kv_tokens work. Series labelled with a
// rank become that rank's sample, and only ranks present are reported, so an engine whose
// dp_size ranks are not all there has no usable report. Unlabelled series describe the
// whole engine and become rank 0, with its other ranks reported empty so the sum stays
// right. Metrics reports are basic: no exposition has a waiting-uncached-token gauge.
func parseMetrics(b []byte, at time.Time, dpSize int) ([]rankSample, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decoding /metrics: %w", err)
	}
	running, labelled, okR := sumByRank(fams, runningGauges)
	waiting, _, okW := sumByRank(fams, waitingGauges)
	if !okR || !okW {
		return nil, fmt.Errorf("decoding /metrics: no running/waiting gauges (want sglang:num_running_reqs and sglang:num_queue_reqs, or vllm:num_requests_running and vllm:num_requests_waiting)")
	}
	usage, _, okU := sumByRank(fams, usageGauges)
	capacity := kvCapacity(fams[cacheInfo])
	out := make([]rankSample, 0, max(dpSize, 1))
	for rank := range max(dpSize, 1) {
		v, ok := running[rank]
		if !ok && (labelled || rank == 0) {
			continue // a rank the engine did not report
		}
		s := rankSample{rank: rank}
		s.At, s.Running, s.Waiting = at, int64(v), int64(waiting[rank])
		switch c, okC := capacity(rank); {
		case !okU:
		case !labelled && rank > 0:
			s.KVKnown = true // the whole engine's usage is on rank 0
		case okC:
			if u, ok := usage[rank]; ok {
				s.KVKnown, s.MaxKVTokens = true, c
				s.UsedKVTokens = int64(math.Round(u * float64(c)))
				s.TotalKVTokens = s.UsedKVTokens
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// sumByRank sums the first gauge family present among names per rank label (rank 0 when
// unlabelled) and reports whether any series had a rank label.
func sumByRank(fams map[string]*dto.MetricFamily, names []string) (map[int]float64, bool, bool) {
	for _, name := range names {
		fam, ok := fams[name]
		if !ok {
			continue
		}
		sums := map[int]float64{}
		labelled := false
		for _, m := range fam.GetMetric() {
			rank, ok := seriesRank(m)
			labelled = labelled || ok
			sums[rank] += m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
		return sums, labelled, true
	}
	return nil, false, false
}

func seriesRank(m *dto.Metric) (int, bool) {
	for _, lp := range m.GetLabel() {
		for _, name := range rankLabels {
			if lp.GetName() == name {
				if n, err := strconv.Atoi(lp.GetValue()); err == nil && n >= 0 {
					return n, true
				}
			}
		}
	}
	return 0, false
}

// kvCapacity reads each rank's KV capacity in tokens from vLLM's cache_config_info labels
// (num_gpu_blocks times block_size). An unlabelled series gives rank 0's, and every
// rank's when no series is labelled, since vLLM's DP ranks share one cache config.
func kvCapacity(fam *dto.MetricFamily) func(rank int) (int64, bool) {
	out := map[int]int64{}
	var shared int64
	for _, m := range fam.GetMetric() {
		var blocks, size int64
		for _, lp := range m.GetLabel() {
			n, err := strconv.ParseInt(lp.GetValue(), 10, 64)
			if err != nil {
				continue
			}
			switch lp.GetName() {
			case "num_gpu_blocks":
				blocks = n
			case "block_size":
				size = n
			}
		}
		if blocks <= 0 || size <= 0 {
			continue
		}
		if rank, ok := seriesRank(m); ok {
			out[rank] = blocks * size
		} else {
			shared = blocks * size
		}
	}
	return func(rank int) (int64, bool) {
		if c, ok := out[rank]; ok {
			return c, true
		}
		return shared, shared > 0
	}
}
