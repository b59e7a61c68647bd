package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// fastConfig is the default model run a hundred times faster than real time: a default
// request (64 output tokens) takes about 7 ms.
func fastConfig() Config {
	cfg := DefaultConfig()
	cfg.TimeScale = 0.01
	cfg.BootstrapTimeout = 5 * time.Second
	return cfg
}

// startFleet starts engines that stop when the test ends.
func startFleet(t *testing.T, specs ...EngineSpec) *Fleet {
	t.Helper()
	f, err := Start(t.Context(), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fleet: %v", err)
		}
	})
	return f
}

// startEngine starts one plain engine serving model "m" with the fast config.
func startEngine(t *testing.T, mutate ...func(*EngineSpec)) *Engine {
	t.Helper()
	spec := EngineSpec{ID: "E1", Model: "m", Config: fastConfig()}
	for _, f := range mutate {
		f(&spec)
	}
	return startFleet(t, spec).Engines()[0]
}

func client(e *Engine) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.URL()+"/v1"), option.WithAPIKey("dummy"), option.WithMaxRetries(0))
}

// testCtx bounds one test's requests, so a bug shows up as a failure rather than a hang.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// do sends a request and returns the status and body.
func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp.StatusCode, string(data)
}

// getJSON fetches url and decodes its JSON body into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	status, body := do(t, http.MethodGet, url, "")
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, status, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
}

// chatBody is a minimal chat request body.
func chatBody(extra string) string {
	return `{"model":"m","messages":[{"role":"user","content":"hello there"}]` + extra + `}`
}

// testCtxCancel is testCtx with its cancel function, for tests that abandon a request.
func testCtxCancel(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx, cancel
}
