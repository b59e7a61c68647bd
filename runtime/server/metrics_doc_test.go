package server

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/routerkit/router/runtime/plan"
)

// TestDocumentedMetricsExistFromStart scrapes a router that has served nothing: every
// series docs/serve.md documents is there (zero-valued), and the exposition passes the
// checks of `promtool check metrics` (promlint: counters end in _total, units are base
// units in the name, snake_case, help text present).
func TestDocumentedMetricsExistFromStart(t *testing.T) {
	doc, err := os.ReadFile("../../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "### Metrics\n")
	if !ok {
		t.Fatal("docs/serve.md has no Metrics section")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	documented := regexp.MustCompile("`(router_[a-z_]+)`").FindAllStringSubmatch(table, -1)
	if len(documented) < 10 {
		t.Fatalf("found %d documented series in docs/serve.md; the table's format changed", len(documented))
	}

	// An admission cap, so that rejections have a series to start at, and an SLO
	// preference, so that SLO selections have one; KV-event series exist for engines that
	// publish events, which serve_metrics.txtar checks on the demo fleet.
	p := plainPlan("E1")
	p.Models[0].Buckets[0].Groups.Plain.Policy.Admission.MaxRunningRequests = 8
	p.Models[0].SLO.TTFT = plan.SLOFirst
	ttft := 200.0
	p.Models[0].Buckets[0].Estimates = &plan.Estimates{TTFTMS: &ttft}
	fc := startFleet(t, p)
	resp, err := http.Get(fc.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, d := range documented {
		if strings.HasPrefix(d[1], "router_kv_") {
			continue
		}
		if !regexp.MustCompile(`(?m)^` + d[1] + `(_bucket|_sum|_count)?(\{| )`).Match(body) {
			t.Errorf("%s is documented but has no series before the first request", d[1])
		}
	}

	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "router_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}
