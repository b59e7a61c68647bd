package monitor

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// TestHealthChangeLevels: an engine going down is logged at WARN, its recovery at INFO,
// and an unchanged state not at all.
func TestHealthChangeLevels(t *testing.T) {
	p := &plan.Plan{Engines: []plan.Engine{{ID: "E1", URL: "http://127.0.0.1:1", Model: "m", Role: plan.RolePlain, DPSize: 1}}}
	reg, err := engine.FromPlan(p.Engines)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	m := New(p, reg, nil, nil, slog.New(slog.NewTextHandler(&buf, nil)))
	m.setHealth("E1", false, errors.New("connection refused"))
	m.setHealth("E1", false, errors.New("connection refused"))
	m.setHealth("E1", true, nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got:\n%s", buf.String())
	}
	if !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "healthy=false") || !strings.Contains(lines[0], `error="connection refused"`) {
		t.Errorf("going down: %s", lines[0])
	}
	if !strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "healthy=true") {
		t.Errorf("recovery: %s", lines[1])
	}
}
