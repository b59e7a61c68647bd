package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

// pdFleet starts a prefill engine P (bootstrap port 8998) and a decode engine D.
func pdFleet(t *testing.T, bootstrapTimeout time.Duration) (p, d *Engine) {
	t.Helper()
	cfg := fastConfig()
	cfg.BootstrapTimeout = bootstrapTimeout
	f := startFleet(t,
		EngineSpec{ID: "P", Model: "m", Role: plan.RolePrefill, BootstrapPort: 8998, Config: cfg},
		EngineSpec{ID: "D", Model: "m", Role: plan.RoleDecode, Config: cfg},
	)
	return f.Engine("P"), f.Engine("D")
}

func pdBody(room string, port int) string {
	return chatBody(`,"bootstrap_host":"localhost","bootstrap_port":` + strconv.Itoa(port) + `,"bootstrap_room":` + room)
}

func TestPDRejectsRequestsWithoutBootstrapFields(t *testing.T) {
	p, d := pdFleet(t, time.Second)
	tests := []struct{ name, extra, msg string }{
		{"no room", `,"bootstrap_host":"127.0.0.1","bootstrap_port":8998`, "without bootstrap room id"},
		{"no host", `,"bootstrap_port":8998,"bootstrap_room":7`, "without bootstrap host"},
		{"no port", `,"bootstrap_host":"127.0.0.1","bootstrap_room":7`, "without bootstrap port"},
		{"negative room", `,"bootstrap_host":"127.0.0.1","bootstrap_port":8998,"bootstrap_room":-1`, "Invalid request body"},
	}
	for _, e := range []*Engine{p, d} {
		for _, tt := range tests {
			t.Run(e.ID()+"/"+tt.name, func(t *testing.T) {
				status, body := do(t, http.MethodPost, e.URL()+"/v1/chat/completions", chatBody(tt.extra))
				if status != http.StatusBadRequest || !strings.Contains(body, tt.msg) {
					t.Fatalf("got %d %s, want 400 containing %q", status, body, tt.msg)
				}
			})
		}
	}
}

func TestPDDecodeWaitsForItsPrefill(t *testing.T) {
	p, d := pdFleet(t, 10*time.Second)
	type result struct {
		status int
		body   string
	}
	decoded := make(chan result, 1)
	go func() {
		status, body := do(t, http.MethodPost, d.URL()+"/v1/chat/completions", pdBody("4242", 8998))
		decoded <- result{status, body}
	}()
	wait.For(t, "the decode request to wait for its KV", func() bool {
		var loads loadsBody
		getJSON(t, d.URL()+"/v1/loads?include=disagg", &loads)
		return loads.Loads[0].Disaggregation.DecodeTransferQueueReqs == 1
	})
	select {
	case r := <-decoded:
		t.Fatalf("decode answered before its prefill ran: %d %s", r.status, r.body)
	default:
	}

	status, body := do(t, http.MethodPost, p.URL()+"/v1/chat/completions", pdBody("4242", 8998))
	var pre completion
	if status != http.StatusOK || json.Unmarshal([]byte(body), &pre) != nil || pre.Usage.CompletionTokens != 1 {
		t.Fatalf("prefill: %d %s, want 200 with one completion token", status, body)
	}
	r := <-decoded
	var dec completion
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &dec) != nil || dec.Usage.CompletionTokens != fastConfig().OutputTokens {
		t.Fatalf("decode: %d %s", r.status, r.body)
	}
}

func TestPDDecodeWithoutPrefillFails(t *testing.T) {
	_, d := pdFleet(t, 50*time.Millisecond)
	status, body := do(t, http.MethodPost, d.URL()+"/v1/chat/completions", pdBody("1", 8998))
	if status != http.StatusInternalServerError || !strings.Contains(body, "KV transfer failed: no prefill for bootstrap room 1") {
		t.Fatalf("got %d %s, want 500 naming the missing prefill", status, body)
	}
}

func TestPDDecodeWithRemotePrefillDoesNotWait(t *testing.T) {
	_, d := pdFleet(t, 10*time.Second)
	// No engine of this process has bootstrap port 9999: the prefill runs elsewhere.
	if status, body := do(t, http.MethodPost, d.URL()+"/v1/chat/completions", pdBody("5", 9999)); status != http.StatusOK {
		t.Fatalf("got %d %s", status, body)
	}
}

func TestPDDecodeFailsWhenItsPrefillIsRejected(t *testing.T) {
	p, d := pdFleet(t, 10*time.Second)
	decoded := make(chan string, 1)
	go func() {
		_, body := do(t, http.MethodPost, d.URL()+"/v1/chat/completions", pdBody("77", 8998))
		decoded <- body
	}()
	wait.For(t, "the decode request to wait for its KV", func() bool { return d.ranks[0].transferWaiting.Load() == 1 })
	bad := `{"model":"m","messages":[],"bootstrap_host":"127.0.0.1","bootstrap_port":8998,"bootstrap_room":77}`
	if status, _ := do(t, http.MethodPost, p.URL()+"/v1/chat/completions", bad); status != http.StatusBadRequest {
		t.Fatalf("prefill of an empty conversation = %d, want 400", status)
	}
	if body := <-decoded; !strings.Contains(body, "KV transfer failed: prefill rejected the request: Messages cannot be empty.") {
		t.Fatalf("decode answered %s", body)
	}
}
