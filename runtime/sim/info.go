package sim

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"

	"github.com/routerkit/router/runtime/plan"
)

// version is what the simulator reports where SGLang reports its version.
const version = "router-sim"

func (e *Engine) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if e.Faults().Unhealthy {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (e *Engine) handleModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		Root        string `json:"root"`
		MaxModelLen int    `json:"max_model_len"`
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []model{{
			ID: e.spec.Model, Object: "model", Created: e.started.Unix(), OwnedBy: "sglang",
			Root: e.spec.Model, MaxModelLen: e.spec.Config.ContextLength,
		}},
	})
}

// kvEventsInfo is the kv_events block of /server_info. It carries both the endpoint of
// rank 0 and the host/port-base form the experimental SGLang router discovers.
type kvEventsInfo struct {
	Publisher        string   `json:"publisher"`
	Endpoint         string   `json:"endpoint"`
	Endpoints        []string `json:"endpoints"`
	EndpointHost     string   `json:"endpoint_host"`
	EndpointPortBase int      `json:"endpoint_port_base"`
	Topic            string   `json:"topic"`
	BlockSize        int      `json:"block_size"`
	DPSize           int      `json:"dp_size"`
}

func (e *Engine) handleServerInfo(w http.ResponseWriter, _ *http.Request) {
	cfg := e.spec.Config
	mode := "null"
	if e.spec.Role != plan.RolePlain {
		mode = string(e.spec.Role)
	}
	info := map[string]any{
		"model_path":                    e.spec.Model,
		"served_model_name":             e.spec.Model,
		"version":                       version,
		"tp_size":                       1,
		"dp_size":                       len(e.ranks),
		"page_size":                     cfg.BlockSize,
		"context_length":                cfg.ContextLength,
		"max_total_num_tokens":          cfg.KVCapacityTokens,
		"max_running_requests":          cfg.MaxRunningRequests,
		"max_prefill_tokens":            cfg.MaxPrefillTokens,
		"disaggregation_mode":           mode,
		"disaggregation_bootstrap_port": e.spec.BootstrapPort,
	}
	if eps := e.KVEndpoints(); eps != nil {
		host, port, _ := net.SplitHostPort(eps[0][len("tcp://"):])
		base, _ := strconv.Atoi(port)
		kv := kvEventsInfo{
			Publisher: "zmq", Endpoint: eps[0], Endpoints: eps, EndpointHost: host, EndpointPortBase: base,
			Topic: e.KVTopic(), BlockSize: cfg.BlockSize, DPSize: len(e.ranks),
		}
		info["kv_events"] = kv
		// SGLang echoes its --kv-events-config server argument as a JSON string.
		cfgJSON, _ := json.Marshal(map[string]string{"publisher": "zmq", "endpoint": "tcp://*:" + port, "topic": kv.Topic})
		info["kv_events_config"] = string(cfgJSON)
	}
	writeJSON(w, http.StatusOK, info)
}

// flushMessage is SGLang's /flush_cache body, for success (200) and refusal (400) alike.
const flushMessage = "Cache flushed.\nPlease check backend logs for more details. " +
	"(When there are running or waiting requests, the operation will not be performed.)\n"

// handleFlush empties every rank's prefix cache, each publishing AllBlocksCleared. Like
// SGLang it refuses while requests are running or waiting.
func (e *Engine) handleFlush(w http.ResponseWriter, _ *http.Request) {
	status := http.StatusOK
	for _, k := range e.ranks {
		if !k.flush() {
			status = http.StatusBadRequest
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(flushMessage))
}
