package monitor

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var at = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestParseLoadsNativeAndBasic(t *testing.T) {
	// Shape of SGLang's v1_loads.py response: one object per DP rank under "loads".
	body := `{"timestamp": "2026-12-02T12:00:00Z", "version": "0.5", "loads": [
	  {"dp_rank": 0, "timestamp": 1.5, "num_running_reqs": 3, "num_waiting_reqs": 2,
	   "num_waiting_uncached_tokens": 900, "num_used_tokens": 5000, "num_total_tokens": 5900,
	   "max_total_num_tokens": 100000, "token_usage": 0.05, "max_running_requests": 48,
	   "queues": {"waiting": 2}},
	  {"dp_rank": 1, "num_running_reqs": 1, "num_waiting_reqs": 0}]}`
	got, err := parseLoads([]byte(body), at)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("want 2 ranks, got %d", len(got))
	}
	r0, r1 := got[0], got[1]
	if r0.rank != 0 || !r0.Native || r0.Running != 3 || r0.Waiting != 2 || r0.WaitingUncachedTokens != 900 ||
		r0.UsedKVTokens != 5000 || r0.MaxKVTokens != 100000 || r0.MaxRunning != 48 || !r0.At.Equal(at) {
		t.Errorf("rank 0: %+v", r0)
	}
	// A rank without the native fields is basic, not zero-filled native.
	if r1.rank != 1 || r1.Native || r1.Running != 1 || r1.Waiting != 0 {
		t.Errorf("rank 1: %+v", r1)
	}
}

func TestParseLoadsRejectsMalformed(t *testing.T) {
	for name, body := range map[string]string{
		"not json":       `<html>`,
		"no loads":       `{"loads": []}`,
		"missing counts": `{"loads": [{"dp_rank": 0, "num_running_reqs": 1}]}`,
		"wrong type":     `{"loads": [{"num_running_reqs": "many", "num_waiting_reqs": 0}]}`,
	} {
		if _, err := parseLoads([]byte(body), at); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestParseGetLoad(t *testing.T) {
	// num_reqs is running + waiting; dp_rank may be null, then the position counts.
	body := `[{"dp_rank": null, "num_reqs": 7, "num_waiting_reqs": 2, "num_tokens": 18342, "ts_tic": 1.0},
	          {"dp_rank": null, "num_reqs": 1, "num_waiting_reqs": 1, "num_pages": 3}]`
	got, err := parseGetLoad([]byte(body), at)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].rank != 0 || got[0].Running != 5 || got[0].Waiting != 2 || got[0].Native {
		t.Errorf("rank 0: %+v", got[0])
	}
	if got[1].rank != 1 || got[1].Running != 0 || got[1].Waiting != 1 {
		t.Errorf("rank 1: %+v", got[1])
	}
	if _, err := parseGetLoad([]byte(`[{"dp_rank": 0}]`), at); err == nil {
		t.Error("a rank without counts must be an error")
	}
}

func TestParseMetrics(t *testing.T) {
	sglang := `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",dp_rank="0"} 4
sglang:num_running_reqs{model_name="m",dp_rank="1"} 6
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",dp_rank="0"} 1
sglang:num_queue_reqs{model_name="m",dp_rank="1"} 0
`
	got, err := parseMetrics([]byte(sglang), at, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Running != 4 || got[0].Waiting != 1 || got[1].Running != 6 || got[1].Waiting != 0 {
		t.Errorf("sglang per rank: %+v", got)
	}

	// vLLM labels each DP rank's engine core "engine" (vllm/v1/metrics/loggers.py).
	vllm := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 2
vllm:num_requests_running{model_name="m",engine="1"} 3
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m",engine="0"} 1
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.25
vllm:kv_cache_usage_perc{model_name="m",engine="1"} 0.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="1000"} 1.0
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="1",num_gpu_blocks="2000"} 1.0
`
	got, err = parseMetrics([]byte(vllm), at, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []rankSample{{rank: 0}, {rank: 1}}
	want[0].Running, want[0].Waiting, want[0].KVKnown, want[0].MaxKVTokens, want[0].UsedKVTokens, want[0].TotalKVTokens = 2, 1, true, 16000, 4000, 4000
	want[1].Running, want[1].Waiting, want[1].KVKnown, want[1].MaxKVTokens, want[1].UsedKVTokens, want[1].TotalKVTokens = 3, 0, true, 32000, 16000, 16000
	for i := range want {
		want[i].At = at
	}
	if !slices.Equal(got, want) {
		t.Errorf("vllm per engine rank:\n got %+v\nwant %+v", got, want)
	}

	// A labelled rank missing from the exposition is not reported, so the engine's
	// report stays incomplete rather than counting the rank as idle.
	got, err = parseMetrics([]byte(vllm), at, 3)
	if err != nil || len(got) != 2 {
		t.Errorf("dp_size 3 with ranks 0-1 reported: %+v, %v; want two ranks", got, err)
	}

	// Older vLLM: the deprecated usage gauge, one unlabelled cache config for the engine.
	// Unlabelled series are the whole engine, on rank 0; the other rank reports empty.
	old := `vllm:num_requests_running{model_name="m"} 5
vllm:num_requests_waiting{model_name="m"} 2
vllm:gpu_cache_usage_perc{model_name="m"} 0.125
vllm:cache_config_info{block_size="32",num_gpu_blocks="100"} 1
`
	got, err = parseMetrics([]byte(old), at, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Running != 5 || got[0].Waiting != 2 || !got[0].KVKnown || got[0].UsedKVTokens != 400 || got[0].MaxKVTokens != 3200 ||
		got[1].Running != 0 || !got[1].KVKnown || got[1].MaxKVTokens != 0 {
		t.Errorf("older vllm: %+v", got)
	}

	// Without cache_config_info the capacity is unknown, and so is KV.
	got, err = parseMetrics([]byte(old[:strings.Index(old, "vllm:cache_config_info")]), at, 1)
	if err != nil || len(got) != 1 || got[0].KVKnown || got[0].Running != 5 {
		t.Errorf("no capacity: %+v, %v", got, err)
	}

	if _, err := parseMetrics([]byte("# TYPE other gauge\nother 1\n"), at, 1); err == nil {
		t.Error("an exposition without load gauges must be an error")
	}
}

// simLoads is a /v1/loads body as the simulator (and SGLang) answers it: one rank with
// every core field.
const simLoads = `{"timestamp":"2026-12-03T00:00:00Z","loads":[{"dp_rank":0,"timestamp":1764720000.123,` +
	`"num_running_reqs":3,"num_waiting_reqs":1,"num_waiting_uncached_tokens":900,"num_used_tokens":5000,` +
	`"num_total_tokens":5900,"max_total_num_tokens":100000,"max_running_requests":48,"token_usage":0.05,` +
	`"gen_throughput":812.5,"cache_hit_rate":0.42,"utilization":0.0625}]}`

// BenchmarkParseLoads: the scanner decoder against the encoding/json one it replaced.
//
//	go test -run '^$' -bench ParseLoads -benchmem ./runtime/monitor
func BenchmarkParseLoads(b *testing.B) {
	body := []byte(simLoads)
	for _, p := range []struct {
		name  string
		parse func([]byte, time.Time) ([]rankSample, error)
	}{{"scanner", parseLoads}, {"encoding_json", parseLoadsReference}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.parse(body, at); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
