package sim

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/routerkit/router/internal/wait"
)

func TestInfoEndpoints(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) { s.DPSize = 2 })
	if status, _ := do(t, http.MethodGet, e.URL()+"/health", ""); status != http.StatusOK {
		t.Fatalf("/health = %d", status)
	}
	var models struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	getJSON(t, e.URL()+"/v1/models", &models)
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "m" || models.Data[0].Object != "model" {
		t.Fatalf("/v1/models = %+v", models)
	}
	var info map[string]any
	getJSON(t, e.URL()+"/server_info", &info)
	if info["served_model_name"] != "m" || info["dp_size"] != 2.0 || info["page_size"] != 16.0 || info["disaggregation_mode"] != "null" {
		t.Fatalf("/server_info = %v", info)
	}
	if _, ok := info["kv_events"]; ok {
		t.Fatal("kv_events reported with KV events off")
	}
	if status, body := do(t, http.MethodPost, e.URL()+"/flush_cache", ""); status != http.StatusOK || !strings.HasPrefix(body, "Cache flushed.") {
		t.Fatalf("/flush_cache = %d %q", status, body)
	}

	var loads loadsBody
	getJSON(t, e.URL()+"/v1/loads?dp_rank=1&include=all", &loads)
	if len(loads.Loads) != 1 || loads.Loads[0].DPRank != 1 || loads.Loads[0].Queues == nil || loads.Loads[0].Disaggregation == nil {
		t.Fatalf("/v1/loads?dp_rank=1 = %+v", loads)
	}
	if status, _ := do(t, http.MethodGet, e.URL()+"/v1/loads?dp_rank=2", ""); status != http.StatusBadRequest {
		t.Fatalf("/v1/loads?dp_rank=2 = %d, want 400", status)
	}
	_, metrics := do(t, http.MethodGet, e.URL()+"/metrics", "")
	for _, want := range []string{
		"# TYPE sglang:num_running_reqs gauge",
		`sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="1"} 0`,
		"# TYPE sglang:generation_tokens_total counter",
	} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
}

// loadsBody is /v1/loads as a router reads it.
type loadsBody struct {
	Timestamp string
	Loads     []rankLoadJSON
}

func TestLoadReportsShowTheQueue(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) {
		s.Config.MaxRunningRequests = 1
		s.Config.TimeScale = 1
		s.Config.OutputTokens = 10000
		s.Config.ContextLength = 16384
	})
	ctx, cancel := context.WithCancel(testCtx(t))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 3 {
		wg.Go(func() {
			c := client(e)
			_, _ = c.Chat.Completions.New(ctx, params("Keep going.")) // cancelled below
		})
	}

	var loads loadsBody
	wait.For(t, "one request decoding and two waiting", func() bool {
		getJSON(t, e.URL()+"/v1/loads", &loads)
		l := loads.Loads[0]
		return l.NumRunningReqs == 1 && l.NumWaitingReqs == 2 && l.GenThroughput > 0
	})
	l := loads.Loads[0]
	input := int(promptTokens("Keep going."))
	if l.MaxRunningRequests != 1 || l.MaxTotalNumTokens != DefaultConfig().KVCapacityTokens || l.Utilization != 1 {
		t.Fatalf("capacities: %+v", l)
	}
	// The waiting requests share the running one's prompt, whose full blocks are cached.
	if bs := DefaultConfig().BlockSize; l.NumWaitingUncachedTokens != 2*(input%bs) {
		t.Fatalf("num_waiting_uncached_tokens = %d, want %d", l.NumWaitingUncachedTokens, 2*(input%bs))
	}
	if l.NumUsedTokens <= input || l.NumTotalTokens != l.NumUsedTokens+2*input || l.TokenUsage <= 0 {
		t.Fatalf("token counts: %+v", l)
	}

	var getLoad []getLoadJSON
	getJSON(t, e.URL()+"/get_load", &getLoad)
	if len(getLoad) != 1 || getLoad[0].NumReqs != 3 || getLoad[0].NumWaitingReqs != 2 || getLoad[0].NumTokens < 3*input {
		t.Fatalf("/get_load = %+v", getLoad)
	}
	_, metrics := do(t, http.MethodGet, e.URL()+"/metrics", "")
	if !strings.Contains(metrics, `sglang:num_queue_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"} 2`) {
		t.Fatalf("/metrics does not show the queue:\n%s", metrics)
	}
	if status, _ := do(t, http.MethodPost, e.URL()+"/flush_cache", ""); status != http.StatusBadRequest {
		t.Fatalf("/flush_cache while busy = %d, want 400", status)
	}
}
