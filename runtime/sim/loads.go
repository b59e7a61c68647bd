package sim

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// loadSnapshot is the load of every rank at one instant.
type loadSnapshot struct {
	at    time.Time
	ranks []load
}

func (e *Engine) snapshot(now time.Time) *loadSnapshot {
	s := &loadSnapshot{at: now, ranks: make([]load, len(e.ranks))}
	for i, k := range e.ranks {
		l := k.load()
		// SGLang counts requests in the PD bootstrap and transfer queues as waiting.
		l.TransferWaiting = int(k.transferWaiting.Load())
		l.Waiting += l.TransferWaiting
		s.ranks[i] = l
	}
	return s
}

// currentLoad returns the report the load endpoints serve, honouring the StaleLoad fault,
// and whether the MalformedLoad fault is on.
func (e *Engine) currentLoad() (*loadSnapshot, bool) {
	fs := e.faults.Load()
	if fs.stale != nil {
		return fs.stale, fs.MalformedLoad
	}
	return e.snapshot(time.Now()), fs.MalformedLoad
}

// Values derived from a rank's load, shared by all three report shapes.
func (l load) tokenUsage() float64 { return float64(l.UsedTokens) / float64(l.CapacityTokens) }

func (l load) cacheHitRate() float64 {
	if l.promptTokens == 0 {
		return 0
	}
	return float64(l.cachedTokens) / float64(l.promptTokens)
}

// totalTokens is KV in use plus the input still waiting for prefill, SGLang's
// num_total_tokens and /get_load num_tokens.
func (l load) totalTokens() int { return l.UsedTokens + l.WaitingInputTokens }

// rankLoadJSON is one element of /v1/loads "loads" (SGLang's GetLoadsReqOutput).
type rankLoadJSON struct {
	DPRank                   int         `json:"dp_rank"`
	Timestamp                float64     `json:"timestamp"`
	NumRunningReqs           int         `json:"num_running_reqs"`
	NumWaitingReqs           int         `json:"num_waiting_reqs"`
	NumWaitingUncachedTokens int         `json:"num_waiting_uncached_tokens"`
	NumUsedTokens            int         `json:"num_used_tokens"`
	NumTotalTokens           int         `json:"num_total_tokens"`
	MaxTotalNumTokens        int         `json:"max_total_num_tokens"`
	TokenUsage               float64     `json:"token_usage"`
	GenThroughput            float64     `json:"gen_throughput"`
	CacheHitRate             float64     `json:"cache_hit_rate"`
	Utilization              float64     `json:"utilization"`
	MaxRunningRequests       int         `json:"max_running_requests"`
	Disaggregation           *disaggJSON `json:"disaggregation,omitempty"`
	Queues                   *queuesJSON `json:"queues,omitempty"`
}

type disaggJSON struct {
	Mode                     string `json:"mode"`
	PrefillPreallocQueueReqs int    `json:"prefill_prealloc_queue_reqs"`
	PrefillInflightQueueReqs int    `json:"prefill_inflight_queue_reqs"`
	DecodePreallocQueueReqs  int    `json:"decode_prealloc_queue_reqs"`
	DecodeTransferQueueReqs  int    `json:"decode_transfer_queue_reqs"`
}

type queuesJSON struct {
	Waiting   int `json:"waiting"`
	Grammar   int `json:"grammar"`
	Paused    int `json:"paused"`
	Retracted int `json:"retracted"`
}

// handleLoads serves SGLang's GET /v1/loads?dp_rank=&include=core,disagg,queues,all.
// Sections the simulator has nothing to say about (memory, spec, lora) are left out.
func (e *Engine) handleLoads(w http.ResponseWriter, r *http.Request) {
	snap, malformed := e.currentLoad()
	if malformed {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"timestamp": "` + snap.at.Format(time.RFC3339) + `", "loads": [{"dp_rank": 0, "num_running_reqs": `))
		return
	}
	include := strings.Split(r.URL.Query().Get("include"), ",")
	withDisagg := slices.Contains(include, "disagg") || slices.Contains(include, "all")
	withQueues := slices.Contains(include, "queues") || slices.Contains(include, "all")
	onlyRank := -1
	if v := r.URL.Query().Get("dp_rank"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= len(snap.ranks) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("dp_rank must be between 0 and %d", len(snap.ranks)-1))
			return
		}
		onlyRank = n
	}
	ts := unixSeconds(snap.at)
	loads := []rankLoadJSON{}
	for i, l := range snap.ranks {
		if onlyRank >= 0 && i != onlyRank {
			continue
		}
		item := rankLoadJSON{
			DPRank: i, Timestamp: ts,
			NumRunningReqs: l.Running, NumWaitingReqs: l.Waiting,
			NumWaitingUncachedTokens: l.WaitingUncachedTokens,
			NumUsedTokens:            l.UsedTokens, NumTotalTokens: l.totalTokens(),
			MaxTotalNumTokens: l.CapacityTokens, TokenUsage: l.tokenUsage(),
			GenThroughput: l.throughput, CacheHitRate: l.cacheHitRate(),
			Utilization:        float64(l.Running) / float64(l.MaxRunning),
			MaxRunningRequests: l.MaxRunning,
		}
		if withDisagg {
			item.Disaggregation = e.disagg(l)
		}
		if withQueues {
			item.Queues = &queuesJSON{Waiting: l.Waiting}
		}
		loads = append(loads, item)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"timestamp":        snap.at.UTC().Format(time.RFC3339Nano),
		"version":          version,
		"accelerator":      "simulated",
		"num_accelerators": len(snap.ranks),
		"loads":            loads,
	})
}

func (e *Engine) disagg(l load) *disaggJSON {
	d := &disaggJSON{Mode: "null"}
	switch e.spec.Role {
	case plan.RolePrefill:
		d.Mode = "prefill"
		d.PrefillInflightQueueReqs = l.Running
	case plan.RoleDecode:
		d.Mode = "decode"
		d.DecodeTransferQueueReqs = l.TransferWaiting
	}
	return d
}

// getLoadJSON is one element of the older GET /get_load array.
type getLoadJSON struct {
	DPRank         int     `json:"dp_rank"`
	NumReqs        int     `json:"num_reqs"`
	NumWaitingReqs int     `json:"num_waiting_reqs"`
	NumTokens      int     `json:"num_tokens"`
	TsTic          float64 `json:"ts_tic"`
}

func (e *Engine) handleGetLoad(w http.ResponseWriter, _ *http.Request) {
	snap, malformed := e.currentLoad()
	if malformed {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"dp_rank": 0, "num_reqs": "many", "num_tokens": }]`))
		return
	}
	out := make([]getLoadJSON, len(snap.ranks))
	for i, l := range snap.ranks {
		out[i] = getLoadJSON{
			DPRank: i, NumReqs: l.Running + l.Waiting, NumWaitingReqs: l.Waiting, NumTokens: l.totalTokens(),
			// ts_tic is the scheduler's perf_counter: seconds on a monotonic clock.
			TsTic: snap.at.Sub(e.started).Seconds(),
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleMetrics serves Prometheus text with SGLang's metric names and labels.
func (e *Engine) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	snap, malformed := e.currentLoad()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if malformed {
		_, _ = w.Write([]byte("sglang:num_running_reqs{model_name=\"" + e.spec.Model + "\" 3\nsglang:token_usage{} NaNish\n"))
		return
	}
	engineType := "unified"
	if e.spec.Role != plan.RolePlain {
		engineType = string(e.spec.Role)
	}
	labels := make([]string, len(snap.ranks))
	for i := range snap.ranks {
		labels[i] = fmt.Sprintf(`model_name=%q,engine_type=%q,tp_rank="0",pp_rank="0"`, e.spec.Model, engineType)
		if len(snap.ranks) > 1 {
			labels[i] += fmt.Sprintf(`,dp_rank="%d"`, i)
		}
	}
	var b strings.Builder
	metric := func(name, typ, help string, value func(load) float64) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s %s\n", name, help, name, typ)
		for i, l := range snap.ranks {
			fmt.Fprintf(&b, "sglang:%s{%s} %s\n", name, labels[i], strconv.FormatFloat(value(l), 'g', -1, 64))
		}
	}
	metric("num_running_reqs", "gauge", "The number of running requests.", func(l load) float64 { return float64(l.Running) })
	metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", func(l load) float64 { return float64(l.Waiting) })
	metric("num_used_tokens", "gauge", "The number of used tokens.", func(l load) float64 { return float64(l.UsedTokens) })
	metric("max_total_num_tokens", "gauge", "Maximum total number of tokens in the KV cache pool.", func(l load) float64 { return float64(l.CapacityTokens) })
	metric("token_usage", "gauge", "The token usage.", load.tokenUsage)
	metric("cache_hit_rate", "gauge", "The prefix cache hit rate.", load.cacheHitRate)
	metric("gen_throughput", "gauge", "The generation throughput (token/s).", func(l load) float64 { return l.throughput })
	metric("prompt_tokens_total", "counter", "Number of prefill tokens processed.", func(l load) float64 { return float64(l.promptTokens) })
	metric("cached_tokens_total", "counter", "Number of cached prompt tokens.", func(l load) float64 { return float64(l.cachedTokens) })
	metric("generation_tokens_total", "counter", "Number of generation tokens processed.", func(l load) float64 { return float64(l.generatedTokens) })
	metric("num_requests_total", "counter", "Number of requests processed.", func(l load) float64 { return float64(l.requests) })
	_, _ = w.Write([]byte(b.String()))
}
