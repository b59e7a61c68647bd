package policy

import (
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// TestApproximateIndexSizedByReportedCapacity: without capacity_tokens, each engine's
// entry is the KV capacity the load monitor read from it, summed over DP ranks, and
// follows a changed report; capacity_tokens overrides it.
//
// The fields are SGLang's max_total_num_tokens, one per dp_rank in GET /v1/loads
// (GetLoadsReqOutput, sglang:python/sglang/srt/entrypoints/v1_loads.py), which the
// monitor reads into a native Sample's MaxKVTokens, and vLLM's num_gpu_blocks ×
// block_size labels of vllm:cache_config_info (vllm/v1/metrics/loggers.py, the info
// metric llm-d's approximate producer autoTune also reads), a basic Sample with KVKnown.
func TestApproximateIndexSizedByReportedCapacity(t *testing.T) {
	engines := []plan.Engine{
		{ID: "S", Model: "m", Role: plan.RolePrefill, DPSize: 2, Load: plan.LoadSource{StaleAfterMS: 1000}},
		{ID: "V", Model: "m", Role: plan.RolePrefill, DPSize: 1, Load: plan.LoadSource{StaleAfterMS: 1000}},
		{ID: "D1", Model: "m", Role: plan.RoleDecode, DPSize: 1},
	}
	p := approxPlan(plan.PrefixSource{Type: "approximate", TTLSecs: 60, BlockSize: 16})
	p.Engines = engines
	table := load.NewTable(engines, func() time.Time { return t0 })
	deps, err := NewDeps(p, table, nil, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	a := deps.Approx[*p.Models[0].Buckets[0].Groups.PD.Prefill.Policy.PrefixSource]
	report := func(id string, rank int, s load.Sample) {
		t.Helper()
		s.At = t0
		if err := table.Update(id, rank, s); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.CapacityBlocks("S"); got != 500_000/16 {
		t.Fatalf("before any report: %d blocks, want the 500000-token default", got)
	}
	report("S", 0, load.Sample{Native: true, MaxKVTokens: 160_000})
	if got := a.CapacityBlocks("S"); got != 500_000/16 {
		t.Fatalf("with one of two ranks reported: %d blocks, want the default until both have", got)
	}
	report("S", 1, load.Sample{Native: true, MaxKVTokens: 160_000})
	report("V", 0, load.Sample{KVKnown: true, MaxKVTokens: 4800}) // num_gpu_blocks 300 × block_size 16
	if s, v := a.CapacityBlocks("S"), a.CapacityBlocks("V"); s != 20_000 || v != 300 {
		t.Fatalf("capacities S %d, V %d blocks; want 20000 (two ranks of 160000 tokens) and 300", s, v)
	}
	deps.RecordDispatch("V", NewBlockHashes(ids(16*400)))
	if got := a.Blocks("V"); got != 300 {
		t.Fatalf("a 400-block prompt on a 300-block engine: %d blocks held, want 300", got)
	}
	report("V", 0, load.Sample{KVKnown: true, MaxKVTokens: 1600}) // restarted with a smaller pool
	deps.RecordDispatch("V", NewBlockHashes(ids(16)))
	if got := a.Blocks("V"); got != 100 {
		t.Fatalf("after the engine reported 100 blocks: %d held", got)
	}

	p = approxPlan(plan.PrefixSource{Type: "approximate", CapacityTokens: 32_000, TTLSecs: 60, BlockSize: 16})
	p.Engines = engines
	deps, err = NewDeps(p, table, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := deps.Approx[*p.Models[0].Buckets[0].Groups.PD.Prefill.Policy.PrefixSource].CapacityBlocks("S"); got != 2000 {
		t.Fatalf("with capacity_tokens 32000: %d blocks, want 2000 whatever the engine reports", got)
	}
}
