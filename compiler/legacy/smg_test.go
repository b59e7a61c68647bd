package legacy

import (
	"errors"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// Expected values below come from SMG's sources, not from the migrator:
// smg-project/smg@f8daa8835 model_gateway/src/main.rs (CliArgs, clap without
// infer_long_args), policies/manual.rs and consistent_hashing.rs (X-SMG-Routing-Key, random
// fallback), bindings/python/src/smg/launch_router.py (argparse, allow_abbrev default) and
// pyproject.toml ([project.scripts]); lightseekorg/smg@868f3264a (prefill admission).

// smgLine is a plain SMG line with a model name added.
var smgLine = []string{"--model-id", "m", "--worker-urls", "http://10.0.0.1:30000"}

func TestProgramForms(t *testing.T) {
	for _, tt := range []struct {
		program []string
		dialect Dialect
	}{
		{[]string{"python", "-m", "sglang_router.launch_router"}, DialectClassic},
		{[]string{"python3", "-m", "smg.launch_router"}, DialectClassic},
		{[]string{"sglang-router", "launch"}, DialectClassic},
		{[]string{"smg", "launch"}, DialectClassic},
		{[]string{"smg", "start"}, DialectClassic},
		{[]string{"smg"}, DialectClassic},
		{[]string{"amg", "launch"}, DialectClassic},
		{[]string{"shepherd-model-gateway", "launch"}, DialectClassic},
		{[]string{"sgl-model-gateway"}, DialectClassic},
		{[]string{"./target/release/sgl-model-gateway"}, DialectClassic},
		{[]string{"/opt/smg/target/release/smg", "launch"}, DialectClassic},
		{[]string{"cargo", "run", "--release", "--bin", "sgl-model-gateway", "--"}, DialectAuto},
		{[]string{"sgl-router"}, DialectAuto},
	} {
		t.Run(strings.Join(tt.program, " "), func(t *testing.T) {
			args := append(append([]string{}, tt.program...), smgLine...)
			d, rest, program, _ := splitProgram(args)
			if d != tt.dialect || program != strings.Join(tt.program, " ") || len(rest) != len(smgLine) {
				t.Fatalf("splitProgram = %q, %q, %q; want %q, %q and the flags", d, program, rest, tt.dialect, strings.Join(tt.program, " "))
			}
			src, _, err := Migrate(Input{Args: args})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(src), "//\t"+strings.Join(tt.program, " ")+" --model-id m") {
				t.Fatalf("the header does not quote the program:\n%s", src[:300])
			}
		})
	}
}

func TestFlagPrefixes(t *testing.T) {
	python := []string{"python", "-m", "sglang_router.launch_router"}
	// argparse reads a unique prefix as the flag.
	p := migrate(t, python, "--model-path", "m", "--worker-urls", "http://10.0.0.1:30000", "--pol", "random", "--request-timeout=60")
	if got := selection(p).Type; got != "random" {
		t.Fatalf("--pol random: policy %q, want random", got)
	}
	if p.Timeouts.TotalMS != 60_000 {
		t.Fatalf("--request-timeout=60: total_ms %d, want 60000", p.Timeouts.TotalMS)
	}
	// An ambiguous prefix names the candidates, as argparse did.
	_, _, err := Migrate(Input{Args: with(python, "--model-path", "m", "--worker-urls", "http://10.0.0.1:30000", "--prefill-q", "3")})
	var amb *AmbiguousFlagError
	if !errors.As(err, &amb) || amb.Given != "--prefill-q" || strings.Join(amb.Candidates, " ") != "--prefill-queue-size --prefill-queue-timeout-secs" {
		t.Fatalf("err = %v, want an ambiguous --prefill-q naming both --prefill-queue-* flags", err)
	}
	// clap took no prefixes: the Rust binary refused the line, and so does migrate.
	_, _, err = Migrate(Input{Args: with([]string{"sgl-model-gateway"}, smgLine...)})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Migrate(Input{Args: with([]string{"sgl-model-gateway"}, "--model-path", "m", "--worker-urls", "http://10.0.0.1:30000", "--pol", "random")})
	if err == nil || !strings.Contains(err.Error(), "unknown flag --pol: the Rust command line (clap) takes no abbreviations") || !strings.Contains(err.Error(), "--policy") {
		t.Fatalf("err = %v, want --pol refused as clap refused it, naming --policy", err)
	}
	// A typo gets a suggestion.
	_, _, err = Migrate(Input{Args: with(python, "--model-path", "m", "--worker-urls", "http://10.0.0.1:30000", "--polcy", "random")})
	if err == nil || !strings.Contains(err.Error(), "unknown flag --polcy") || !strings.HasSuffix(err.Error(), "did you mean --policy?") {
		t.Fatalf("err = %v, want a did-you-mean --policy", err)
	}
	// An alias is the flag (main.rs: alias = "cache-match-threshold").
	p = migrate(t, python, "--model-path", "m", "--worker-urls", "http://10.0.0.1:30000", "--cache-match-threshold", "0.6")
	if got := selection(p).MinMatchRatio; got == nil || *got != 0.6 {
		t.Fatalf("--cache-match-threshold 0.6: min_match_ratio %v, want 0.6", got)
	}
}

func TestSMGPolicies(t *testing.T) {
	smg := []string{"smg", "launch", "--model-id", "m", "--worker-urls", "http://10.0.0.1:30000"}
	for _, tt := range []struct {
		name     string
		extra    []string
		fallback plan.PolicyType
		header   string
		idle     int
		sweep    int
	}{
		// consistent_hashing: keyless requests go to a random worker; bindings keep the
		// router's idle default (600) and sweep (60).
		{"consistent_hashing", []string{"--policy", "consistent_hashing"}, "random", "x-smg-routing-key", 600, 60},
		// manual: --assignment-mode random by default, --max-idle-secs 14400.
		{"manual", []string{"--policy", "manual"}, "random", "x-smg-routing-key", 14400, 60},
		{"manual tuned", []string{"--policy", "manual", "--assignment-mode", "min_load", "--max-idle-secs", "300", "--eviction-interval", "30", "--routing-key-headers", "x-tenant-session"}, "load_based", "x-tenant-session", 300, 30},
		{"manual with the alias", []string{"--policy", "manual", "--sticky-key-idle-secs", "120"}, "random", "x-smg-routing-key", 120, 60},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := migrate(t, smg, tt.extra...)
			pol, m := selection(p), p.Models[0]
			if pol.Type != "sticky" || pol.Fallback != tt.fallback || m.RoutingKeyHeader != tt.header || m.StickyIdleSecs != tt.idle || m.StickyEvictionIntervalSecs != tt.sweep {
				t.Fatalf("got %s fallback %s, header %s, idle %d, sweep %d; want sticky fallback %s, header %s, idle %d, sweep %d",
					pol.Type, pol.Fallback, m.RoutingKeyHeader, m.StickyIdleSecs, m.StickyEvictionIntervalSecs, tt.fallback, tt.header, tt.idle, tt.sweep)
			}
		})
	}
	p := migrate(t, smg, "--policy", "least_load")
	if selection(p).Type != "load_based" {
		t.Fatalf("least_load: %s, want load_based", selection(p).Type)
	}
	for _, tt := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--policy", "manual", "--assignment-mode", "min_group"}, "--assignment-mode min_group cannot be migrated"},
		{[]string{"--policy", "manual", "--routing-key-headers", "x-a", "x-b"}, "the router reads the routing key from one header"},
		{[]string{"--policy", "random", "--max-idle-secs", "5"}, "--max-idle-secs tunes --policy manual"},
		{[]string{"--policy", "prefix_hash"}, "--policy prefix_hash cannot be migrated"},
		{[]string{"--policy", "cache_aware", "--prefix-token-count", "128"}, "--prefix-token-count cannot be migrated: it tunes --policy prefix_hash"},
		{[]string{"--policy", "passthrough"}, "--policy passthrough cannot be migrated"},
		{[]string{"--routing-key-override"}, "--routing-key-override cannot be migrated"},
	} {
		if got := rejected(t, append(append([]string{}, smg...), tt.extra...)); !strings.Contains(got, tt.want) {
			t.Errorf("%q: %s\nwant %q", tt.extra, got, tt.want)
		}
	}
}

func TestSMGAdmissionAndTuning(t *testing.T) {
	smgPD := []string{"smg", "launch", "--model-id", "m", "--pd-disaggregation", "--prefill", "http://10.0.0.1:30000", "--decode", "http://10.0.0.2:30000"}
	// --worker-overload-waiting-requests skipped any worker with that many waiting: every group.
	p := migrate(t, smgPD, "--policy", "power_of_two", "--worker-overload-waiting-requests", "16")
	pd := p.Models[0].Buckets[0].Groups.PD
	if pd.Prefill.Policy.Admission.MaxWaitingRequests != 16 || pd.Decode.Policy.Admission.MaxWaitingRequests != 16 {
		t.Fatalf("max_waiting_requests prefill %d decode %d, want 16 on both", pd.Prefill.Policy.Admission.MaxWaitingRequests, pd.Decode.Policy.Admission.MaxWaitingRequests)
	}
	// Health checks and the shutdown drain have settings.
	p = migrate(t, smgLine, "--health-check-interval-secs", "10", "--health-check-timeout-secs", "3", "--health-failure-threshold", "5", "--health-success-threshold", "1", "--health-check-endpoint", "/health", "--shutdown-grace-period-secs", "120")
	if want := (plan.Health{IntervalMS: 10_000, TimeoutMS: 3_000, FailureThreshold: 5, SuccessThreshold: 1}); p.Health != want || p.ShutdownGraceSecs != 120 {
		t.Fatalf("health %+v, grace %d; want %+v, 120", p.Health, p.ShutdownGraceSecs, want)
	}
	// cache_aware's approximate index takes --cache-ttl-secs and --block-size.
	p = migrate(t, []string{"smg"}, "--model-path", "m", "--worker-urls", "http://10.0.0.1:30000", "--cache-ttl-secs", "240", "--block-size", "32")
	if src := selection(p).PrefixSource; src.TTLSecs != 240 || src.BlockSize != 32 {
		t.Fatalf("prefix source %+v, want ttl 240 s, block 32", src)
	}
	// The era-2 per-worker cap is the in-flight cap.
	p = migrate(t, plainFleet, "--max-concurrent-requests-per-worker", "6")
	if got := selection(p).Admission.MaxInflightRequests; got != 6 {
		t.Fatalf("--max-concurrent-requests-per-worker 6: max_inflight_requests %d", got)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{with(smgLine, "--prefill-max-inflight-requests-per-worker", "4"), "caps prefill workers, and the command line has none"},
		{with(smgPD, "--prefill-queue-size", "10"), "need --prefill-max-inflight-requests-per-worker N, N > 0"},
		{with(smgPD, "--prefill-max-inflight-requests-per-worker", "4", "--max-concurrent-requests", "8"), "the router has one queue per model: give one of them"},
		{with(smgLine, "--health-check-endpoint", "/ready"), "--health-check-endpoint /ready cannot be migrated"},
		{with(smgLine, "--worker-overload-token-usage", "0.9"), "set max_kv_tokens to that fraction"},
		{with(smgLine, "--epd-disaggregation"), "encode workers (EPD disaggregation"},
		{with(plainFleet, "--max-concurrent-requests-per-worker", "6", "--filter", "overloaded", "--max-in-flight", "4"), "give one"},
	} {
		if got := rejected(t, tt.args); !strings.Contains(got, tt.want) {
			t.Errorf("%q: %s\nwant %q", tt.args, got, tt.want)
		}
	}
}

func TestDiscoveryRefusalGivesEnginesFromDNS(t *testing.T) {
	got := rejected(t, []string{"smg", "launch", "--model-id", "m", "--pd-disaggregation", "--service-discovery",
		"--prefill-selector", "app=sglang-prefill", "--decode-selector", "app=sglang-decode", "--service-discovery-namespace", "llm"})
	for _, want := range []string{
		"--service-discovery --prefill-selector --decode-selector --service-discovery-namespace cannot be migrated",
		// SMG's default --service-discovery-port is 80.
		`engines_from_dns: [{name: "sglang-prefill.llm.svc.cluster.local", port: 80, model: "m", role: "prefill"}, {name: "sglang-decode.llm.svc.cluster.local", port: 80, model: "m", role: "decode"}]`,
		"annotation sglang.ai/bootstrap-port",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("refusal:\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "--pd-disaggregation without --prefill") {
		t.Errorf("the discovery refusal is repeated as a PD problem:\n%s", got)
	}
}

// TestSMGNotes: the header names what SMG's policies and gateway flags did differently.
func TestSMGNotes(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"smg", "--model-path", "m", "--worker-urls", "http://w:1", "--policy", "consistent_hashing"},
			[]string{"placed each routing key on a hash ring of the workers", "The X-SMG-Target-Worker header is not read."}},
		{[]string{"smg", "--model-path", "m", "--worker-urls", "http://w:1", "--policy", "least_load"},
			[]string{"load_based picks the engine with the least reported load"}},
		{[]string{"smg", "--model-path", "m", "--worker-urls", "http://w:1", "--api-key", "k", "--max-concurrent-requests", "4"},
			[]string{"SMG also sent --api-key to its workers", "waits in a FIFO queue per model", "Without --rate-limit-tokens-per-second SMG's token bucket did not refill"}},
		{[]string{"smg", "--model-path", "m", "--worker-urls", "http://w:1"},
			[]string{"SMG served Prometheus metrics on a separate listener, 0.0.0.0:29000 by default"}},
	} {
		src, err := translate(Input{Args: tt.args})
		if err != nil {
			t.Fatal(err)
		}
		notes := notesOf(src)
		for _, w := range tt.want {
			if !strings.Contains(notes, w) {
				t.Errorf("%q: the header lacks %q:\n%s", tt.args, w, notes)
			}
		}
	}
}
