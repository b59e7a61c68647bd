package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/runtime/plan"
)

// setFaults replaces an engine's faults through the admin endpoint, as an operator would.
func setFaults(t *testing.T, e *Engine, body string) {
	t.Helper()
	if status, resp := do(t, http.MethodPut, e.URL()+"/sim/faults", body); status != http.StatusOK {
		t.Fatalf("PUT /sim/faults %s: %d %s", body, status, resp)
	}
}

func TestFaultAdminEndpoint(t *testing.T) {
	e := startEngine(t)
	setFaults(t, e, `{"fail_status":503,"fail_rate":0.5}`)
	var got Faults
	getJSON(t, e.URL()+"/sim/faults", &got)
	if got != (Faults{FailStatus: 503, FailRate: 0.5}) {
		t.Fatalf("GET /sim/faults = %+v", got)
	}
	for _, bad := range []string{`{"fail_status":200}`, `{"fail_rate":2}`, `{"slowdown":-1}`, `{"nope":true}`, `{`} {
		if status, _ := do(t, http.MethodPut, e.URL()+"/sim/faults", bad); status != http.StatusBadRequest {
			t.Errorf("PUT %s = %d, want 400", bad, status)
		}
	}
	if status, _ := do(t, http.MethodDelete, e.URL()+"/sim/faults", ""); status != http.StatusOK || e.Faults() != (Faults{}) {
		t.Fatalf("DELETE /sim/faults left %+v", e.Faults())
	}
}

func TestFaultFailStatus(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) { s.Faults = Faults{FailStatus: 503} })
	c := client(e)
	_, err := c.Chat.Completions.New(testCtx(t), params("hi"))
	apiErr, ok := errors.AsType[*openai.Error](err)
	if !ok || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("got %v, want a 503 API error", err)
	}
	if status, body := do(t, http.MethodPost, e.URL()+"/v1/chat/completions", chatBody("")); status != 503 || !strings.Contains(body, `"type":"ServiceUnavailableError"`) {
		t.Fatalf("got %d %s, want an SGLang error body", status, body)
	}
	setFaults(t, e, `{}`)
	if _, err := c.Chat.Completions.New(testCtx(t), params("hi")); err != nil {
		t.Fatalf("after clearing faults: %v", err)
	}
}

func TestFaultHang(t *testing.T) {
	e := startEngine(t)
	setFaults(t, e, `{"hang":true}`)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	c := client(e)
	if _, err := c.Chat.Completions.New(ctx, params("hi")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the client's deadline to expire", err)
	}
	if l := e.ranks[0].load(); l.Running+l.Waiting != 0 {
		t.Fatal("a hung request must not occupy the engine")
	}
}

func TestFaultCutStream(t *testing.T) {
	e := startEngine(t)
	setFaults(t, e, `{"cut_stream":true,"cut_after_tokens":2}`)
	c := client(e)
	stream := c.Chat.Completions.NewStreaming(testCtx(t), params("hi"))
	var content strings.Builder
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			content.WriteString(ch.Choices[0].Delta.Content)
			if ch.Choices[0].FinishReason != "" {
				t.Fatal("a cut stream must not finish")
			}
		}
	}
	if stream.Err() == nil {
		t.Fatal("a cut stream must end in an error")
	}
	stream.Close()
	if got := content.String(); got != tokenText(0)+tokenText(1) {
		t.Fatalf("received %q before the cut, want two tokens", got)
	}
	if _, err := c.Chat.Completions.New(testCtx(t), params("hi")); err == nil {
		t.Fatal("a cut JSON response must fail to decode")
	}
}

func TestFaultUnhealthy(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) { s.Faults = Faults{Unhealthy: true} })
	if status, _ := do(t, http.MethodGet, e.URL()+"/health", ""); status != http.StatusServiceUnavailable {
		t.Fatalf("/health = %d, want 503", status)
	}
	setFaults(t, e, `{}`)
	if status, _ := do(t, http.MethodGet, e.URL()+"/health", ""); status != http.StatusOK {
		t.Fatalf("/health after recovery = %d", status)
	}
}

func TestFaultSlowdownScalesSteps(t *testing.T) {
	e := startEngine(t)
	k := e.ranks[0]
	base := k.scale(time.Second)
	setFaults(t, e, `{"slowdown":3}`)
	if got := k.scale(time.Second); got != 3*base {
		t.Fatalf("slowdown 3: a 1s step sleeps %v, want %v", got, 3*base)
	}
}

func TestFaultStaleLoad(t *testing.T) {
	e := startEngine(t)
	var before loadsBody
	getJSON(t, e.URL()+"/v1/loads", &before)
	setFaults(t, e, `{"stale_load":true}`)
	var frozen loadsBody
	getJSON(t, e.URL()+"/v1/loads", &frozen)

	c := client(e)
	if _, err := c.Chat.Completions.New(testCtx(t), params("hi")); err != nil {
		t.Fatal(err)
	}
	var after loadsBody
	getJSON(t, e.URL()+"/v1/loads", &after)
	if after.Timestamp != frozen.Timestamp || after.Loads[0] != frozen.Loads[0] {
		t.Fatalf("stale load changed: %+v then %+v", frozen, after)
	}
	if !strings.Contains(metricsText(t, e), "sglang:generation_tokens_total{model_name=\"m\",engine_type=\"unified\",tp_rank=\"0\",pp_rank=\"0\"} 0") {
		t.Fatal("stale /metrics shows the new request")
	}
	setFaults(t, e, `{}`)
	getJSON(t, e.URL()+"/v1/loads", &after)
	if after.Timestamp == frozen.Timestamp {
		t.Fatal("load stayed frozen after the fault was cleared")
	}
}

func TestFaultMalformedLoad(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) { s.Faults = Faults{MalformedLoad: true} })
	for _, path := range []string{"/v1/loads", "/get_load"} {
		status, body := do(t, http.MethodGet, e.URL()+path, "")
		if status != http.StatusOK || json.Valid([]byte(body)) {
			t.Errorf("%s = %d %q, want 200 with invalid JSON", path, status, body)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(metricsText(t, e)), "\n") {
		fields := strings.Fields(line)
		if _, err := strconv.ParseFloat(fields[len(fields)-1], 64); err != nil || !strings.Contains(line, "} ") {
			return // at least one sample line does not parse
		}
	}
	t.Fatal("malformed /metrics parses")
}

func metricsText(t *testing.T, e *Engine) string {
	t.Helper()
	_, body := do(t, http.MethodGet, e.URL()+"/metrics", "")
	return body
}

func TestGarbageBodyFirstByteDelayAndKill(t *testing.T) {
	f, err := Start(t.Context(), []EngineSpec{{ID: "E1", Model: "m", Role: plan.RolePlain, Config: DefaultConfig()}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e := f.Engine("E1")
	if err := e.SetFaults(Faults{GarbageBody: true, FirstByteDelayMS: 30}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := http.Post(e.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Valid(body) || time.Since(start) < 30*time.Millisecond {
		t.Errorf("garbage: %d %q after %v", resp.StatusCode, body, time.Since(start))
	}
	if err := (Faults{FirstByteDelayMS: -1}).Validate(); err == nil {
		t.Error("a negative delay validated")
	}
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(e.URL() + "/health"); err == nil {
		t.Error("a killed engine still answers")
	}
}
