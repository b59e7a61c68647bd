package conformance

import (
	"testing"
	"time"
)

// TestMetricLine reads Prometheus text lines as the simulator's client_golang writes them.
func TestMetricLine(t *testing.T) {
	tests := []struct {
		line  string
		name  string
		value float64
		ok    bool
	}{
		{`vllm:prefix_cache_hits{model_name="fake-model"} 1536`, "vllm:prefix_cache_hits", 1536, true},
		{`vllm:prefix_cache_queries_total 3.2e+03`, "vllm:prefix_cache_queries_total", 3200, true},
		{`# TYPE vllm:prefix_cache_hits_total counter`, "", 0, false},
		{``, "", 0, false},
		{`vllm:num_requests_running{model_name="a b"} NaNx`, "", 0, false},
	}
	for _, tt := range tests {
		name, value, ok := metricLine([]byte(tt.line))
		if name != tt.name || value != tt.value || ok != tt.ok {
			t.Errorf("%q: got %q %v %v, want %q %v %v", tt.line, name, value, ok, tt.name, tt.value, tt.ok)
		}
	}
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 10; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := quantile(d, 0.5); got != 5*time.Millisecond {
		t.Errorf("p50 = %v, want 5ms", got)
	}
	if got := quantile(d, 0.9); got != 9*time.Millisecond {
		t.Errorf("p90 = %v, want 9ms", got)
	}
	if got := quantile(nil, 0.9); got != 0 {
		t.Errorf("p90 of nothing = %v, want 0", got)
	}
}
