package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/plan"
)

func plainPlan(ids ...string) *plan.Plan {
	engines := make([]plan.Engine, len(ids))
	for i, id := range ids {
		engines[i] = plainEngine(id)
	}
	return testPlan(engines, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Limits: plan.Limits{Max: i64(1000)}, MaxContextTokens: i64(2000),
			Groups: plan.Groups{Plain: ptr(group(plan.RoundRobin, plan.Admission{}))}},
	}})
}

// Defect 8: the router reads keys exactly as the engine does, or refuses the request.
func TestParserDifferentialKeysAre400(t *testing.T) {
	p := plainPlan("E1")
	fc := startFleet(t, p)
	for _, tc := range []struct{ name, body, want string }{
		{"case variant routes elsewhere", `{"model":"m","Model":"other","messages":[{"role":"user","content":"x"}]}`, `\"Model\"`},
		{"duplicate budget bypasses limits", chat("m", "x", `, "max_tokens": 30000, "MAX_TOKENS": 1`), `\"MAX_TOKENS\"`},
		{"duplicate key", chat("m", "x", `, "max_tokens": 30000, "max_tokens": 1`), `duplicate key \"max_tokens\"`},
		{"escaped duplicate", `{"model":"m","mod\u0065l":"m","messages":[{"role":"user","content":"x"}]}`, `duplicate key \"model\"`},
		{"nested case variant", `{"model":"m","messages":[{"role":"user","Content":"x","content":"y"}]}`, `messages[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code, body := fc.post(t, tc.body)
			if status != http.StatusBadRequest || code != answer.CodeInvalidRequest || !strings.Contains(body, tc.want) {
				t.Errorf("got %d %s %s, want 400 %s naming %s", status, code, body, answer.CodeInvalidRequest, tc.want)
			}
		})
	}
	if n := len(fc.sent.bodies(p.Engines[0].URL)); n != 0 {
		t.Errorf("the engine got %d requests the router refused", n)
	}
	status, code, body := fc.post(t, `{"model":"m","messages":[{"role":"user","content":"x","Content":"y"}],"max_tokens":1}`)
	if status != http.StatusBadRequest {
		t.Errorf("case variant after the exact key: %d %s %s", status, code, body)
	}
}

// An engine whose answer has endless headers gets a 502, not the router's memory, and
// the request is not left in flight.
func TestEndlessEngineHeadersAre502(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			for i := range 1100 {
				w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", 1000))
			}
		}
		io.WriteString(w, "{}")
	}))
	defer engine.Close()
	p := plainPlan("E1")
	p.Engines[0].URL = engine.URL
	fc := serveRouter(t, p, Options{})
	status, code, body := fc.post(t, chat("m", "x", `, "max_tokens": 1`))
	if status != http.StatusBadGateway || code != "engine_error" {
		t.Errorf("engine with 1.1 MB of headers: %d %s %s, want 502 engine_error", status, code, body)
	}
	fc.inflightZero(t)
}
