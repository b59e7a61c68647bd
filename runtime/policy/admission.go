package policy

import (
	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// Limits are an attachment's hard admission caps (docs/design.md, Admission). A zero cap is
// unset. A cap admits while the engine's metric is below it, so a metric equal to the cap
// rejects. Admission observes load; it does not count the request or reserve capacity, so
// concurrent requests may pass against the same observation.
type Limits plan.Admission

// Configuration names of the caps, as they appear in rejections.
const (
	LimitRunning        = "max_running_requests"
	LimitWaiting        = "max_waiting_requests"
	LimitKVTokens       = "max_kv_tokens"
	LimitPendingPrefill = "max_pending_prefill_tokens"
	LimitInflight       = "max_inflight_requests"
)

// limitMetric names the engine metric each cap bounds, for messages.
var limitMetric = map[string]string{
	LimitRunning:        "reported running requests",
	LimitWaiting:        "reported waiting requests",
	LimitKVTokens:       "reported KV tokens (used plus pending prefill)",
	LimitPendingPrefill: "reported pending prefill tokens",
	LimitInflight:       "router in-flight requests",
}

// Check returns the rejection of w, or nil when every set cap admits it. r is the load
// record the policy captured when selecting w; nil means unknown, and the caps on
// reported metrics then fail open. Basic reports know running and waiting requests only,
// plus KV tokens when they carry KV usage and capacity (KVKnown, vLLM's /metrics).
// The in-flight count is the router's own and always known.
func (l Limits) Check(w *engine.Worker, stage plan.Role, r *load.Report) *AdmissionRejected {
	reject := func(limit string, value, limitCap int64) *AdmissionRejected {
		if limitCap > 0 && value >= limitCap {
			return &AdmissionRejected{Engine: w, Stage: stage, Limit: limit, Value: value, Cap: limitCap}
		}
		return nil
	}
	if r != nil {
		if rej := reject(LimitRunning, r.Running, l.MaxRunningRequests); rej != nil {
			return rej
		}
		if rej := reject(LimitWaiting, r.Waiting, l.MaxWaitingRequests); rej != nil {
			return rej
		}
		if r.Native || r.KVKnown {
			if rej := reject(LimitKVTokens, r.TotalKVTokens, l.MaxKVTokens); rej != nil {
				return rej
			}
		}
		if r.Native {
			if rej := reject(LimitPendingPrefill, r.WaitingUncachedTokens, l.MaxPendingPrefillTokens); rej != nil {
				return rej
			}
		}
	}
	return reject(LimitInflight, w.Inflight(), l.MaxInflightRequests)
}

// admit checks w, records the verdict and returns the rejection, or nil.
func (l Limits) admit(rec *decision.Trace, w *engine.Worker, stage plan.Role, r *load.Report) *AdmissionRejected {
	rej := l.Check(w, stage, r)
	if rej == nil {
		rec.Admit(w, true, "", 0, 0)
		return nil
	}
	rec.Admit(w, false, rej.Limit, rej.Value, rej.Cap)
	return rej
}
