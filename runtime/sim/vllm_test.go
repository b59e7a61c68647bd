package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// vllmPDFleet is a vLLM prefill engine and a vLLM decode engine of one fleet.
func vllmPDFleet(t *testing.T) (p, d *Engine) {
	t.Helper()
	f := startFleet(t,
		EngineSpec{ID: "P", Model: "m", Kind: plan.KindVLLM, Role: plan.RolePrefill, Config: fastConfig()},
		EngineSpec{ID: "D", Model: "m", Kind: plan.KindVLLM, Role: plan.RoleDecode, Config: fastConfig()})
	return f.Engine("P"), f.Engine("D")
}

// prefillBody is the prefill half as llm-d's routing sidecar sends it
// (internal/proxy/connector_nixlv2.go): the client's request with kv_transfer_params
// asking for a remote decode, no stream, max_tokens 1.
const prefillBody = `{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":1,"stream":false,` +
	`"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`

func TestVLLMPDHandsTheKVOverThroughKVTransferParams(t *testing.T) {
	p, d := vllmPDFleet(t)
	status, body := do(t, http.MethodPost, p.URL()+"/v1/chat/completions", prefillBody)
	if status != http.StatusOK {
		t.Fatalf("prefill: %d %s", status, body)
	}
	var resp struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage            usage           `json:"usage"`
		KVTransferParams json.RawMessage `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	var params kvTransferParams
	if err := json.Unmarshal(resp.KVTransferParams, &params); err != nil {
		t.Fatalf("prefill answered without kv_transfer_params: %s", body)
	}
	if !params.DoRemotePrefill || params.DoRemoteDecode || params.RemoteEngineID == nil || *params.RemoteEngineID != "P" ||
		params.RemoteHost == nil || *params.RemoteHost != "127.0.0.1" || params.RemotePort == nil || len(params.RemoteBlockIDs) == 0 ||
		resp.Usage.CompletionTokens != 1 || resp.Choices[0].FinishReason != "length" {
		t.Fatalf("prefill answer: %s", body)
	}

	// The decode half: the client's request (streaming here) with the prefill's params.
	decode := `{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":8,"stream":true,"kv_transfer_params":` +
		string(resp.KVTransferParams) + `}`
	status, body = do(t, http.MethodPost, d.URL()+"/v1/chat/completions", decode)
	if status != http.StatusOK || !strings.Contains(body, "data: [DONE]") {
		t.Fatalf("decode: %d %s", status, body)
	}
	// The hand-over is consumed: the same params cannot be decoded twice.
	status, body = do(t, http.MethodPost, d.URL()+"/v1/chat/completions", decode)
	if status != http.StatusBadRequest || !strings.Contains(body, "no prefill of this request") {
		t.Fatalf("second decode of one prefill: %d %s", status, body)
	}
	// Unknown requests of a fleet engine are refused; engines outside the fleet are trusted.
	bogus := strings.Replace(decode, *params.RemoteRequestID, "sim-1", 1)
	if status, body = do(t, http.MethodPost, d.URL()+"/v1/chat/completions", bogus); status != http.StatusBadRequest {
		t.Fatalf("decode of an unknown prefill: %d %s", status, body)
	}
	foreign := strings.Replace(decode, `"remote_engine_id":"P"`, `"remote_engine_id":"elsewhere"`, 1)
	if status, body = do(t, http.MethodPost, d.URL()+"/v1/chat/completions", foreign); status != http.StatusOK {
		t.Fatalf("decode of a prefill outside the fleet: %d %s", status, body)
	}
	// Params without the prefill's ids are a client error.
	if status, _ = do(t, http.MethodPost, d.URL()+"/v1/chat/completions", chatBody(`,"kv_transfer_params":{"do_remote_prefill":true}`)); status != http.StatusBadRequest {
		t.Fatalf("decode without remote ids: %d", status)
	}
	// Without kv_transfer_params a vLLM engine of either role serves the request whole
	// (kv_both), and a prefill that did not stop on its cap returns no params.
	if status, body = do(t, http.MethodPost, d.URL()+"/v1/chat/completions", chatBody("")); status != http.StatusOK {
		t.Fatalf("plain request to the decode engine: %d %s", status, body)
	}
	status, body = do(t, http.MethodPost, p.URL()+"/v1/chat/completions", strings.Replace(prefillBody, `"max_tokens":1,`, "", 1))
	if status != http.StatusOK || strings.Contains(body, "kv_transfer_params") {
		t.Fatalf("uncapped prefill: %d %s", status, body)
	}
}

func TestVLLMKindServesVLLMEndpoints(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) { s.Kind = plan.KindVLLM; s.DPSize = 2 })
	status, body := do(t, http.MethodGet, e.URL()+"/metrics", "")
	for _, want := range []string{
		`vllm:num_requests_running{engine="1",model_name="m"} 0`,
		`vllm:num_requests_waiting{engine="0",model_name="m"} 0`,
		`vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0`,
		`vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="1",model_name="m",num_gpu_blocks="8192"} 1.0`,
	} {
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "sglang:") {
		t.Fatal("a vLLM engine exposes SGLang metrics")
	}
	for _, path := range []string{"/v1/loads", "/get_load", "/server_info"} {
		if status, _ := do(t, http.MethodGet, e.URL()+path, ""); status != http.StatusNotFound {
			t.Errorf("GET %s = %d on a vLLM engine, want 404", path, status)
		}
	}
}
