package legacy

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/routerkit/router/compiler"
)

var update = flag.Bool("update", false, "rewrite testdata/gateway from the migrator (review the diff)")

// gatewayCases are gateway command lines (corpus lines of SGLang's router documentation,
// docs/advanced_features/router.md @046ed665, with a model name added, and SMG's flags), the
// configuration they migrate to in testdata/gateway, and lines each configuration must hold,
// written from gateway-contract.md's mapping rather than from the output.
//
// compiles marks the cases compiled with the real schema. The TLS case is text only: the
// compiler loads the certificate files it names, which do not exist here; the testscript
// migrate_gateway_serve migrates a TLS line with real files and serves it.
var gatewayCases = []struct {
	name     string
	args     []string
	want     []string
	compiles bool
}{
	{"api_key", []string{"python", "-m", "sglang_router.launch_router", "--model-path", "m", "--worker-urls", "http://worker1:8000", "--api-key", "sk-secret"},
		[]string{`api_keys: ["sk-secret"] // --api-key; the key is now written in this file: prefer api_keys_file`}, true},
	{"tls", []string{"smg", "launch", "--model-path", "m", "--worker-urls", "https://worker1:8000", "--tls-cert-path", "/certs/tls.crt", "--tls-key-path", "/certs/tls.key",
		"--client-cert-path", "/certs/client.crt", "--client-key-path", "/certs/client.key", "--ca-cert-paths", "/certs/ca1.pem", "/certs/ca2.pem"},
		[]string{`cert_file: "/certs/tls.crt" // --tls-cert-path`, `key_file:  "/certs/tls.key" // --tls-key-path`,
			`ca_files: ["/certs/ca1.pem", "/certs/ca2.pem"] // --ca-cert-paths`, `cert_file: "/certs/client.crt" // --client-cert-path`}, false},
	{"queue", []string{"python", "-m", "sglang_router.launch_router", "--model-path", "m", "--worker-urls", "http://worker1:8000", "http://worker2:8001",
		"--max-concurrent-requests", "256", "--rate-limit-tokens-per-second", "512", "--queue-size", "128", "--queue-timeout-secs", "30"},
		[]string{`max_concurrent_requests: 256 // --max-concurrent-requests`, `size:       128   // --queue-size`, `timeout_ms: 30000 // --queue-timeout-secs`,
			`requests_per_second: 512 // --rate-limit-tokens-per-second`, `burst:               256 // --max-concurrent-requests`}, true},
	{"queue_defaults", []string{"smg", "--model-path", "m", "--worker-urls", "http://worker1:8000", "--max-concurrent-requests", "64"},
		[]string{`size:       100   // SMG's default --queue-size 100`, `timeout_ms: 60000 // SMG's default --queue-timeout-secs 60`}, true},
	{"tracing", []string{"python", "-m", "sglang_router.launch_router", "--model-path", "m", "--worker-urls", "http://worker1:8000", "--enable-trace", "--otlp-traces-endpoint", "0.0.0.0:4317"},
		[]string{`endpoint: "0.0.0.0:4317" // --otlp-traces-endpoint`, `protocol: "grpc"`}, true},
	{"tracing_default_endpoint", []string{"smg", "--model-path", "m", "--worker-urls", "http://worker1:8000", "--enable-trace"},
		[]string{`endpoint: "localhost:4317" // --enable-trace with SMG's default --otlp-traces-endpoint`}, true},
	{"metrics", []string{"python", "-m", "sglang_router.launch_router", "--model-path", "m", "--worker-urls", "http://worker1:8000", "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000"},
		[]string{`listen: "0.0.0.0:29000" // --prometheus-host and --prometheus-port`}, true},
	{"metrics_port_only", []string{"smg", "--model-path", "m", "--worker-urls", "http://worker1:8000", "--prometheus-port", "9100"},
		[]string{`listen: "0.0.0.0:9100" // --prometheus-port with SMG's default --prometheus-host 0.0.0.0`}, true},
	{"request_id", []string{"python", "-m", "sglang_router.launch_router", "--model-path", "m", "--worker-urls", "http://worker1:8000", "--request-id-headers", "x-request-id", "x-trace-id"},
		[]string{`headers: ["x-request-id", "x-trace-id"] // --request-id-headers`}, true},
	{"prefill_admission", []string{"smg", "launch", "--model-path", "m", "--pd-disaggregation", "--prefill", "http://p1:30000", "9000", "--decode", "http://d1:30000",
		"--policy", "cache_aware", "--prefill-max-inflight-requests-per-worker", "4", "--prefill-queue-size", "32"},
		[]string{`max_inflight_requests: 4 // --prefill-max-inflight-requests-per-worker`, `size:       32    // --prefill-queue-size`,
			`timeout_ms: 60000 // SMG's default --prefill-queue-timeout-secs 60`}, true},
	// No gateway block: the concurrency limit disabled as SMG's default -1 says.
	{"limit_disabled", []string{"smg", "--model-path", "m", "--worker-urls", "http://worker1:8000", "--max-concurrent-requests", "-1"},
		[]string{`type: "cache_aware" // the classic router's default --policy`}, true},
}

// TestGatewayGoldens: each gateway line migrates to its golden configuration, which holds
// the contract's fields with the flag named beside each value.
func TestGatewayGoldens(t *testing.T) {
	spaces := regexp.MustCompile(`[ \t]+`)
	for _, tt := range gatewayCases {
		t.Run(tt.name, func(t *testing.T) {
			src, err := translate(Input{Args: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "gateway", tt.name+".cue")
			if *update {
				if err := os.WriteFile(golden, src, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(src) != string(want) {
				t.Fatalf("%s differs from the migration:\n%s", golden, src)
			}
			flat := spaces.ReplaceAllString(string(src), " ")
			for _, w := range tt.want {
				if !strings.Contains(flat, spaces.ReplaceAllString(w, " ")) {
					t.Errorf("missing %q in:\n%s", w, src)
				}
			}
			if tt.compiles {
				if _, err := compiler.CompileSources([]compiler.Source{{Name: golden, Data: src}}); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
