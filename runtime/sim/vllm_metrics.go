package sim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// handleVLLMMetrics serves Prometheus text with vLLM's metric names and labels
// (vllm/v1/metrics/loggers.py): every series labelled model_name and engine, the index
// of the DP rank's engine core; KV usage as a fraction; the cache geometry in the labels
// of the cache_config_info info metric; counters with prometheus_client's _total.
func (e *Engine) handleVLLMMetrics(w http.ResponseWriter, _ *http.Request) {
	snap, malformed := e.currentLoad()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if malformed {
		_, _ = w.Write([]byte("vllm:num_requests_running{model_name=\"" + e.spec.Model + "\" 3\nvllm:kv_cache_usage_perc{} NaNish\n"))
		return
	}
	bs := e.spec.Config.BlockSize
	var b strings.Builder
	labels := func(i int) string { return fmt.Sprintf(`engine="%d",model_name=%q`, i, e.spec.Model) }
	metric := func(name, typ, help string, value func(load) float64) {
		fmt.Fprintf(&b, "# HELP vllm:%s %s\n# TYPE vllm:%s %s\n", name, help, name, typ)
		for i, l := range snap.ranks {
			fmt.Fprintf(&b, "vllm:%s{%s} %s\n", name, labels(i), strconv.FormatFloat(value(l), 'g', -1, 64))
		}
	}
	fmt.Fprintf(&b, "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n")
	for i, l := range snap.ranks {
		fmt.Fprintf(&b, "vllm:cache_config_info{block_size=\"%d\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",%s,num_gpu_blocks=\"%d\"} 1.0\n",
			bs, labels(i), l.CapacityTokens/bs)
	}
	metric("num_requests_running", "gauge", "Number of requests in model execution batches.", func(l load) float64 { return float64(l.Running) })
	metric("num_requests_waiting", "gauge", "Number of requests waiting to be processed.", func(l load) float64 { return float64(l.Waiting) })
	metric("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", load.tokenUsage)
	metric("prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", func(l load) float64 { return float64(l.promptTokens) })
	metric("prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", func(l load) float64 { return float64(l.cachedTokens) })
	metric("prompt_tokens_total", "counter", "Number of prefill tokens processed.", func(l load) float64 { return float64(l.promptTokens) })
	metric("generation_tokens_total", "counter", "Number of generation tokens processed.", func(l load) float64 { return float64(l.generatedTokens) })
	metric("request_success_total", "counter", "Count of successfully processed requests.", func(l load) float64 { return float64(l.requests) })
	_, _ = w.Write([]byte(b.String()))
}
