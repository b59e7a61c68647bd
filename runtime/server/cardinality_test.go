package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/logline"
)

// Defect 1: unknown model names (any length, control characters included) never become
// label values, and what the router keeps of them is bounded.
func TestUnknownModelsDoNotGrowMetrics(t *testing.T) {
	fc := startFleet(t, plainPlan("E1"))
	long := strings.Repeat("n", 64<<10)
	for i := range 40 {
		name, _ := json.Marshal(fmt.Sprintf("%s\x01\n%d", long, i))
		status, code, _ := fc.post(t, `{"model":`+string(name)+`,"messages":[{"role":"user","content":"x"}]}`)
		if status != http.StatusNotFound || code != answer.CodeModelNotFound {
			t.Fatalf("unknown model: %d %s", status, code)
		}
	}
	resp, err := http.Get(fc.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "nnnnnnnn") {
		t.Error("/metrics carries a client-chosen model name")
	}
	if !strings.Contains(string(body), `router_requests_total{bucket="none",model="unknown",status="404"} 40`) {
		t.Error("unknown models are not counted under model=\"unknown\"")
	}
	if len(body) > 512<<10 {
		t.Errorf("/metrics is %d bytes after 40 requests", len(body))
	}
	for _, d := range fc.state(t).Decisions {
		if len(d.Model) > logline.MaxModelText+len("…") || len(d.Error) > logline.MaxErrorText+len("…") || strings.ContainsAny(d.Model+d.Error, "\x01\n") {
			t.Fatalf("decision keeps %d bytes of model, %d of error: %.80q", len(d.Model), len(d.Error), d.Model)
		}
	}
}

func TestClipText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"a\nb\x7f", 10, "a?b?"},
		{"héllo", 2, "h…"}, // é is two bytes: never half a rune
	} {
		if got := logline.Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("logline.Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
