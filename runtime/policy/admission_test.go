package policy

import (
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

func TestAdmissionCheck(t *testing.T) {
	// totalKV is used plus pending prefill, what the max_kv_tokens cap reads (docs/design.md,
	// Admission); used tokens are set lower so a cap on them would differ.
	nativeReport := func(running, waiting, uncached, totalKV int64) *load.Report {
		return &load.Report{Sample: load.Sample{Native: true, Running: running, Waiting: waiting,
			WaitingUncachedTokens: uncached, UsedKVTokens: totalKV / 2, TotalKVTokens: totalKV, MaxKVTokens: 1 << 20}}
	}
	basic := &load.Report{Sample: load.Sample{Running: 1, Waiting: 1, UsedKVTokens: 999, WaitingUncachedTokens: 999}}
	tests := []struct {
		name      string
		limits    Limits
		report    *load.Report
		inflight  int64
		wantLimit string // empty: admitted
		wantValue int64
	}{
		{name: "no caps admit everything", report: nativeReport(1000, 1000, 1e9, 1e9), inflight: 1000},
		{name: "running below cap", limits: Limits{MaxRunningRequests: 64}, report: nativeReport(63, 0, 0, 0)},
		{name: "running at cap rejects", limits: Limits{MaxRunningRequests: 64}, report: nativeReport(64, 0, 0, 0),
			wantLimit: LimitRunning, wantValue: 64},
		{name: "waiting at cap rejects", limits: Limits{MaxWaitingRequests: 4}, report: nativeReport(0, 4, 0, 0),
			wantLimit: LimitWaiting, wantValue: 4},
		{name: "kv tokens at cap rejects", limits: Limits{MaxKVTokens: 1000}, report: nativeReport(0, 0, 0, 1000),
			wantLimit: LimitKVTokens, wantValue: 1000},
		{name: "kv tokens below cap", limits: Limits{MaxKVTokens: 1000}, report: nativeReport(0, 0, 0, 999)},
		{name: "pending prefill at cap rejects", limits: Limits{MaxPendingPrefillTokens: 8192}, report: nativeReport(0, 0, 8192, 0),
			wantLimit: LimitPendingPrefill, wantValue: 8192},
		{name: "unknown report fails open", limits: Limits{MaxRunningRequests: 1, MaxWaitingRequests: 1, MaxKVTokens: 1, MaxPendingPrefillTokens: 1}},
		{name: "basic report has no kv or pending metrics", limits: Limits{MaxKVTokens: 1, MaxPendingPrefillTokens: 1}, report: basic},
		// vLLM's /metrics: KV usage and capacity, no pending-prefill tokens.
		{name: "vllm metrics report bounds kv tokens", limits: Limits{MaxKVTokens: 4000, MaxPendingPrefillTokens: 1},
			report:    &load.Report{Sample: load.Sample{KVKnown: true, UsedKVTokens: 4000, TotalKVTokens: 4000, MaxKVTokens: 16000}},
			wantLimit: LimitKVTokens, wantValue: 4000},
		{name: "vllm metrics report below the kv cap, no pending-prefill metric", limits: Limits{MaxKVTokens: 4001, MaxPendingPrefillTokens: 1},
			report: &load.Report{Sample: load.Sample{KVKnown: true, UsedKVTokens: 4000, TotalKVTokens: 4000, MaxKVTokens: 16000, WaitingUncachedTokens: 99}}},
		{name: "basic report still bounds running", limits: Limits{MaxRunningRequests: 1}, report: basic,
			wantLimit: LimitRunning, wantValue: 1},
		{name: "in-flight is known without a report", limits: Limits{MaxInflightRequests: 2}, inflight: 2,
			wantLimit: LimitInflight, wantValue: 2},
		{name: "in-flight below cap", limits: Limits{MaxInflightRequests: 2}, inflight: 1},
		{name: "first failing cap in spec order is reported", limits: Limits{MaxRunningRequests: 5, MaxInflightRequests: 1},
			report: nativeReport(5, 0, 0, 0), inflight: 7, wantLimit: LimitRunning, wantValue: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := engine.New(plan.Engine{ID: "E", Role: plan.RoleDecode})
			w.AddInflight(tt.inflight)
			rej := tt.limits.Check(w, plan.RoleDecode, tt.report)
			if tt.wantLimit == "" {
				if rej != nil {
					t.Fatalf("Check rejected: %v", rej)
				}
				return
			}
			if rej == nil {
				t.Fatalf("Check admitted, want rejection by %s", tt.wantLimit)
			}
			if rej.Limit != tt.wantLimit || rej.Value != tt.wantValue || rej.Engine != w || rej.Stage != plan.RoleDecode {
				t.Fatalf("rejection = %+v, want limit %s value %d", rej, tt.wantLimit, tt.wantValue)
			}
		})
	}
}
