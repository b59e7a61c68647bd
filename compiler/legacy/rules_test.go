package legacy

import (
	"errors"
	"strings"
	"testing"
)

// rejected migrates args, expects Errors, and returns their text.
func rejected(t *testing.T, args []string) string {
	t.Helper()
	src, p, err := Migrate(Input{Args: args})
	if src != nil || p != nil {
		t.Errorf("a rejected command line must yield no configuration")
	}
	var errs Errors
	if !errors.As(err, &errs) || len(errs) == 0 {
		t.Fatalf("want Errors, got %v", err)
	}
	for _, e := range errs {
		if msg := e.Error(); msg[0] >= 'A' && msg[0] <= 'Z' {
			t.Errorf("messages start lowercase: %q", msg)
		}
	}
	return err.Error()
}

func with(base []string, extra ...string) []string {
	return append(append([]string{}, base...), extra...)
}

// The options the target design dropped (docs/design.md, Dropped options) are rejected,
// naming the option and what to use instead.
func TestDroppedOptions(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"policy fused_score", with(plainFleet, "--policy", "fused_score"),
			[]string{"--policy fused_score was dropped", "cache_aware", "load_based"}},
		{"policy score_policy", with(plainFleet, "--policy", "score_policy"),
			[]string{"--policy score_policy was dropped", "cache_aware", "load_based"}},
		{"fuse terms", with(plainFleet, "--fuse", "prefix_cache=2.0,load_based=0.3"),
			[]string{"--fuse was dropped with the fused_score and score_policy policies", "cache_aware"}},
		{"decode policy legacy_host_affinity", with(pdFleet, "--decode-policy", "legacy_host_affinity"),
			[]string{"--decode-policy legacy_host_affinity was dropped", "power_of_two"}},
		{"stable pair", with(plainFleet, "--policy", "session_aware", "--stable-pair"),
			[]string{"--stable-pair was dropped", "no backup engine"}},
		{"affinity mode soft", with(plainFleet, "--policy", "session_aware", "--affinity-mode", "soft"),
			[]string{"--affinity-mode soft was dropped", "strict admitted-binding reuse"}},
		{"prefix_cache filter", with(plainFleet, "--filter", "prefix_cache", "--prefix-cache-min-share", "0.6"),
			[]string{"--filter prefix_cache was dropped", "not its equivalent", "--cache-affinity-min-matched-tokens"}},
		{"prefix_cache filter among others", with(plainFleet, "--filter", "overloaded,prefix_cache", "--max-in-flight", "4"),
			[]string{"--filter prefix_cache was dropped"}},
		{"prefix cache min share", with(plainFleet, "--prefix-cache-min-share", "0.6"),
			[]string{"--prefix-cache-min-share was dropped with the prefix_cache filter", "--cache-affinity-min-match-ratio"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rejected(t, tt.args)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("want %q in:\n%s", w, got)
				}
			}
		})
	}
}

// sgl-router refused these command lines at startup (its into_config rules); so does
// the migration, with the same reasons.
func TestLegacyRules(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"model id is required", []string{"--worker-urls", "http://x"}, "the command line names no model: pass --model-id NAME to router migrate"},
		{"no workers", []string{"--model-id", "m"}, "no workers"},
		{"plain and PD workers", with(plainFleet, "--prefill", "http://p", "--decode", "http://d"), "cannot be combined with --prefill"},
		{"prefill without decode", []string{"--model-id", "m", "--prefill", "http://p"}, "--prefill needs --decode"},
		{"decode without prefill", []string{"--model-id", "m", "--decode", "http://d"}, "--decode needs --prefill"},
		{"schemeless worker", []string{"--model-id", "m", "--worker-urls", "10.0.0.1:30000"}, "10.0.0.1:30000"},
		{"non-http worker", []string{"--model-id", "m", "--worker-urls", "ws://x:30000"}, `unsupported scheme "ws"`},
		{"a worker with two roles", []string{"--model-id", "m", "--prefill", "http://w:1", "--decode", "http://w:1/"}, "worker URL http://w:1/ is given with --prefill and --decode: a worker has one role"},
		{"a prefill worker with two bootstrap ports", with(pdFleet, "--prefill", "http://10.0.0.1:30000", "9001"), "--prefill http://10.0.0.1:30000 is given twice with different bootstrap ports (none and 9001)"},
		{"bad bootstrap port", []string{"--model-id", "m", "--prefill", "http://p", "x", "--decode", "http://d"}, `invalid bootstrap port "x"`},

		{"filter overloaded needs max in flight", with(plainFleet, "--filter", "overloaded"), "--max-in-flight and `--filter overloaded` require each other"},
		{"max in flight needs filter overloaded", with(plainFleet, "--max-in-flight", "64"), "require each other"},
		{"max in flight zero", with(plainFleet, "--filter", "overloaded", "--max-in-flight", "0"), "--max-in-flight must be greater than 0"},
		{"filter listed twice", with(plainFleet, "--filter", "overloaded,overloaded", "--max-in-flight", "64"), "listed more than once"},
		{"filter with sticky", with(plainFleet, "--policy", "sticky", "--filter", "overloaded", "--max-in-flight", "1"), "cannot be combined with --policy sticky"},
		{"unknown filter", with(plainFleet, "--filter", "load_based"), `invalid value "load_based" for --filter`},

		{"unknown policy", with(plainFleet, "--policy", "bogus_policy"), `invalid value "bogus_policy" for --policy`},
		{"cache_aware_zmq was removed by sgl-router", with(plainFleet, "--policy", "cache_aware_zmq"), "cache_aware_zmq"},
		{"cache tuning needs cache_aware", with(plainFleet, "--policy", "power_of_two", "--cache-affinity-min-matched-tokens", "512"), "cache candidate tuning flags require --policy cache_aware"},
		{"queue limit needs cache_aware", with(plainFleet, "--worker-queue-limit", "4"), "cache candidate tuning flags require --policy cache_aware"},
		{"min load choices needs cache_aware", with(plainFleet, "--policy", "power_of_two", "--min-load-choices", "3"), "cache candidate tuning flags require --policy cache_aware"},
		{"queue limit zero, whatever the policy", with(plainFleet, "--worker-queue-limit", "0"), "--worker-queue-limit must be at least 1"},
		{"floor without limit", with(plainFleet, "--policy", "cache_aware", "--saturation-queue-floor", "2"), "--saturation-queue-floor requires --worker-queue-limit"},
		{"floor above limit", with(plainFleet, "--policy", "cache_aware", "--worker-queue-limit", "4", "--saturation-queue-floor", "5"), "must be at most --worker-queue-limit"},
		{"floor zero", with(plainFleet, "--policy", "cache_aware", "--worker-queue-limit", "4", "--saturation-queue-floor", "0"), "--saturation-queue-floor must be at least 1"},
		{"min load choices zero", with(plainFleet, "--policy", "cache_aware", "--min-load-choices", "0"), "--min-load-choices must be at least 1"},
		{"match ratio above one", with(plainFleet, "--policy", "cache_aware", "--cache-affinity-min-match-ratio", "1.1"), "--cache-affinity-min-match-ratio must be finite and in [0, 1]"},
		{"match ratio NaN", with(plainFleet, "--policy", "cache_aware", "--cache-affinity-min-match-ratio", "NaN"), "--cache-affinity-min-match-ratio must be finite"},
		{"negative candidate ratio", with(plainFleet, "--policy", "cache_aware", "--cache-candidate-ratio=-0.1"), "--cache-candidate-ratio must be finite and in [0, 1]"},
		{"candidate min above max", with(plainFleet, "--policy", "cache_aware", "--cache-candidate-min-workers", "9", "--cache-candidate-max-workers", "8"), "min must not exceed max"},
		{"candidate min above the default max", with(plainFleet, "--policy", "cache_aware", "--cache-candidate-min-workers", "40"), "min must not exceed max"},
		{"candidate max zero", with(plainFleet, "--policy", "cache_aware", "--cache-candidate-max-workers", "0"), "must be positive"},
		{"prefix provider needs cache_aware", with(plainFleet, "--cache-prefix-provider", "radix_tree"), "--cache-prefix-provider requires --policy cache_aware"},

		{"pressure tuning needs an affinity policy", with(plainFleet, "--policy", "power_of_two", "--pressure-rel-threshold", "2"), "pressure guard tuning requires --policy session_aware or cache_aware"},
		{"disable pressure guard needs an affinity policy", with(plainFleet, "--disable-pressure-guard"), "--disable-pressure-guard requires --policy session_aware or cache_aware"},
		{"pressure rel threshold must exceed one", with(plainFleet, "--policy", "cache_aware", "--pressure-rel-threshold", "1"), "--pressure-rel-threshold must be finite and greater than 1"},
		{"pressure ms must be non-negative", with(plainFleet, "--policy", "cache_aware", "--pressure-abs-threshold-ms=-1"), "--pressure-abs-threshold-ms must be finite and non-negative"},

		{"session flags need session_aware", with(plainFleet, "--session-id-header", "x-s"), "require --policy session_aware"},
		{"affinity mode needs session_aware", with(plainFleet, "--policy", "cache_aware", "--affinity-mode", "strict"), "require --policy session_aware"},
		{"invalid session header", with(plainFleet, "--policy", "session_aware", "--session-id-header", "bad header"), "not a valid HTTP header name"},
		{"session idle zero", with(plainFleet, "--policy", "session_aware", "--session-idle-secs", "0"), "--session-idle-secs must be greater than 0"},
		{"session eviction zero", with(plainFleet, "--policy", "session_aware", "--session-eviction-interval-secs", "0"), "--session-eviction-interval-secs must be greater than 0"},
		{"unknown session affinity mode", with(plainFleet, "--policy", "session_aware", "--session-affinity-mode", "global"), `invalid value "global"`},

		{"sticky flags need sticky", with(plainFleet, "--routing-key-header", "x-session-id"), "require --policy sticky"},
		{"invalid routing key header", with(plainFleet, "--policy", "sticky", "--routing-key-header", "bad header"), "not a valid HTTP header name"},
		{"cache_aware is no sticky fallback", with(plainFleet, "--policy", "sticky", "--sticky-fallback-policy", "cache_aware"), `invalid value "cache_aware" for --sticky-fallback-policy`},
		{"sticky is no sticky fallback", with(plainFleet, "--policy", "sticky", "--sticky-fallback-policy", "sticky"), `invalid value "sticky"`},
		{"sticky eviction zero", with(plainFleet, "--policy", "sticky", "--sticky-eviction-interval-secs", "0"), "--sticky-eviction-interval-secs must be greater than 0"},
		{"sticky idle zero", with(plainFleet, "--policy", "sticky", "--sticky-idle-secs", "0"), "--sticky-idle-secs must be greater than 0"},

		{"a number that is not one", with(plainFleet, "--policy", "cache_aware", "--cache-switch-margin-tokens", "lots"), `invalid value "lots" for --cache-switch-margin-tokens`},
		{"a negative count", with(plainFleet, "--filter", "overloaded", "--max-in-flight=-1"), "not a non-negative integer"},
		{"a count above int64", with(plainFleet, "--filter", "overloaded", "--max-in-flight", "9223372036854775808"),
			`invalid value "9223372036854775808" for --max-in-flight: above 9223372036854775807, the largest integer the configuration holds`},
		{"port out of range", with(plainFleet, "--port", "70000"), `invalid value "70000" for --port`},
		{"a flag given twice", with(plainFleet, "--policy", "random", "--policy", "random"), "--policy is given more than once"},
		{"a switch with a value", with(plainFleet, "--policy", "cache_aware", "--disable-pressure-guard=true"), "--disable-pressure-guard takes no value"},
		{"a missing value", with(plainFleet, "--policy"), "--policy needs a value"},
		{"a positional argument", with([]string{"extra"}, plainFleet...), `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rejected(t, tt.args); !strings.Contains(got, tt.want) {
				t.Errorf("want %q in:\n%s", tt.want, got)
			}
		})
	}
}

// What sgl-router accepted but the configuration cannot express is an error, never
// dropped: flags outside the routing configuration, global session modes, and values the
// configuration's stricter bounds refuse.
func TestInexpressibleSettings(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", with(plainFleet, "--chat-routing-mode", "reorg"), "unknown flag --chat-routing-mode"},
		{"power of n without reorg", with(plainFleet, "--power-of-n-choices", "2"), "--power-of-n-choices requires --chat-routing reorg"},
		{"power of n above 2", with(plainFleet, "--chat-routing", "reorg", "--power-of-n-choices", "3"), "--power-of-n-choices 3 cannot be migrated"},
		{"input ids forwarding", with(plainFleet, "--disable-input-ids-forwarding"), "--disable-input-ids-forwarding cannot be migrated"},
		{"sampling overrides", with(plainFleet, "--override-sampling-params", `{"temperature": 1}`), "--override-sampling-params cannot be migrated"},
		{"sampling conflict", with(plainFleet, "--sampling-param-conflict", "allow"), "--sampling-param-conflict cannot be migrated"},
		{"shutdown drain out of range", with(plainFleet, "--shutdown-drain-secs", "601"), "--shutdown-drain-secs 601 cannot be migrated"},
		{"termination grace", with(plainFleet, "--termination-grace-secs", "60"), "--termination-grace-secs cannot be migrated"},
		{"request timeout above a day", with(plainFleet, "--request-timeout-secs", "90000"), "--request-timeout-secs 90000 cannot be migrated"},
		{"stale request timeout", with(plainFleet, "--stale-request-timeout-secs", "600"), "--stale-request-timeout-secs cannot be migrated"},
		{"log level", with(plainFleet, "--log-level", "debug"), "--log-level cannot be migrated: logging is not part of the router configuration, but `router serve` has the same flag: pass --log-level debug to `router serve` instead"},
		{"log format", with(plainFleet, "--log-format=json"), "pass --log-format json to `router serve` instead"},
		{"service discovery", []string{"--model-id", "m", "--service-discovery", "--selector", "app=sglang", "zone=a"}, "--service-discovery --selector cannot be migrated: the router does not watch Kubernetes pods; it follows the DNS records of a headless Service (engines_from_dns"},
		{"discovery namespace", with(plainFleet, "--service-discovery-namespace", "prod"), "--service-discovery-namespace cannot be migrated"},
		{"PD selectors", with(plainFleet, "--prefill-selector", "role=p", "--decode-selector", "role=d"), "--decode-selector cannot be migrated"},
		{"breaker cool-down alone", with(plainFleet, "--cb-cool-down-secs", "10"), "--cb-cool-down-secs requires --cb-threshold"},
		{"global session mode", with(plainFleet, "--policy", "session_aware", "--session-affinity-mode", "global-rebind"), "--session-affinity-mode global-rebind cannot be migrated"},
		{"session-only pressure guard", with(plainFleet, "--policy", "session_aware", "--disable-pressure-guard"), "--disable-pressure-guard applies to cache_aware selection only"},
		{"session-only pressure tuning", with(plainFleet, "--policy", "session_aware", "--pressure-abs-threshold-tokens", "2048"), "--pressure-abs-threshold-tokens applies to cache_aware selection only"},
		{"zero pressure ms", with(plainFleet, "--policy", "cache_aware", "--pressure-abs-threshold-ms", "0"), "--pressure-abs-threshold-ms 0 cannot be migrated"},
		{"zero candidate ratio", with(plainFleet, "--policy", "cache_aware", "--cache-candidate-ratio", "0"), "--cache-candidate-ratio 0 cannot be migrated"},
		{"a host that is no host", with(plainFleet, "--host", "a]b"), `--host "a]b" is not a host name or IP address`},
		{"decode policy without decode workers", with(plainFleet, "--decode-policy", "power_of_two"), "--decode-policy selects decode workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rejected(t, tt.args); !strings.Contains(got, tt.want) {
				t.Errorf("want %q in:\n%s", tt.want, got)
			}
		})
	}
}

// Every problem of a stage is reported at once, so one edit fixes the command line.
func TestAllProblemsAtOnce(t *testing.T) {
	got := rejected(t, with(plainFleet, "--fuse", "random", "--stable-pair", "--log-level", "debug", "--bogus", "value"))
	for _, want := range []string{"4 problems:", "--fuse", "--stable-pair", "--log-level", "unknown flag --bogus"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, `"value"`) {
		t.Errorf("the values of an unknown flag are not extra problems:\n%s", got)
	}
}

// sgl-router's KV indexer speaks gRPC and the router's remote_indexer a JSON protocol over
// HTTP: an endpoint would validate and then fail at serve (grpc://) or never answer
// (http://). Its flags are refused, saying why and what keeps cache-aware matching.
func TestIndexerRefused(t *testing.T) {
	cache := with(plainFleet, "--policy", "cache_aware")
	why := "sgl-router's KV indexer (sgl-kv-indexer) speaks gRPC, but the router's remote_indexer prefix source speaks a JSON-over-HTTP protocol"
	instead := []string{"add kv_events: {endpoint: \"tcp://HOST:PORT\"} to each engine", "set prefix_source: {type: \"remote_indexer\", endpoint: \"http://HOST:PORT\"} by hand"}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"grpc endpoint", with(cache, "--kv-indexer-endpoint", "grpc://indexer:50051"), append([]string{"--kv-indexer-endpoint cannot be migrated: " + why}, instead...)},
		{"http endpoint", with(cache, "--kv-indexer-endpoint", "http://indexer:50051"), append([]string{"--kv-indexer-endpoint cannot be migrated: " + why, "never answers"}, instead...)},
		{"endpoint under another policy", with(plainFleet, "--kv-indexer-endpoint=http://indexer:50051"), []string{"--kv-indexer-endpoint cannot be migrated"}},
		{"indexer provider", with(cache, "--cache-prefix-provider", "indexer"), append([]string{"--cache-prefix-provider indexer cannot be migrated: " + why}, instead...)},
		{"query timeout", with(cache, "--kv-indexer-query-timeout-ms", "75"), []string{"--kv-indexer-query-timeout-ms cannot be migrated", "speaks gRPC", "set prefix_source.query_timeout_ms by hand"}},
		{"query concurrency", with(cache, "--kv-indexer-query-max-inflight", "17"), []string{"--kv-indexer-query-max-inflight cannot be migrated", "set prefix_source.max_inflight_queries by hand"}},
		{"all of them", with(cache, "--cache-prefix-provider", "indexer", "--kv-indexer-endpoint", "http://i:1", "--kv-indexer-query-timeout-ms", "75", "--kv-indexer-query-max-inflight", "17"),
			[]string{"4 problems:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rejected(t, tt.args)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("want %q in:\n%s", w, got)
				}
			}
		})
	}
	// The local index, the fix the message names, migrates.
	migrate(t, cache, "--cache-prefix-provider", "radix_tree")
}

// A value quoted in a comment of the configuration cannot hold a control character: a
// line break would end the comment and leave the rest of the value as CUE.
func TestControlCharacters(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{"model id with a line break", Input{Args: []string{"--model-id", "m\nx: 1", "--worker-urls", "http://w"}},
			`--model-id "m\nx: 1" contains a control character`},
		{"model id with a tab", Input{Args: []string{"--model-id=m\tx", "--worker-urls", "http://w"}}, `--model-id "m\tx" contains a control character`},
		{"model id with a C1 control", Input{Args: []string{"--model-id", "m\u0085x", "--worker-urls", "http://w"}}, "--model-id"},
		{"host", Input{Args: with(plainFleet, "--host", "a\nb")}, `--host "a\nb" contains a control character`},
		{"bucket file path", Input{Args: plainFleet, BucketConfig: "b\n.json"}, `--bucket-config "b\n.json": the path contains a control character`},
		{"bucket file path among the legacy flags", Input{Args: with(plainFleet, "--bucket-config", "b\r.json")}, `--bucket-config "b\r.json" contains a control character`},
		{"pair", Input{Args: plainFleet, Pairs: []string{"p\n=d"}}, `--pair "p\n=d" contains a control character`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, p, err := Migrate(tt.in)
			var errs Errors
			if src != nil || p != nil || !errors.As(err, &errs) {
				t.Fatalf("want a rejection, got %v:\n%s", err, src)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("want %q in:\n%v", tt.want, err)
			}
		})
	}
}

// The capacity flags are positive admission caps, and only where sgl-router checked
// capacity: a cap elsewhere would be a check it never made.
func TestCapacityFlagRules(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{"zero running requests", Input{Args: with(plainFleet, "--policy", "power_of_two"), EngineMaxRunningRequests: ptr(int64(0))},
			"--engine-max-running-requests must be greater than 0"},
		{"negative KV tokens", Input{Args: with(plainFleet, "--policy", "power_of_two"), EngineMaxKVTokens: ptr(int64(-1))},
			"--engine-max-kv-tokens must be greater than 0"},
		{"round_robin plain workers had no check", Input{Args: plainFleet, EngineMaxKVTokens: ptr(int64(4096))},
			"--engine-max-kv-tokens: sgl-router checked engine capacity only before power_of_two, session_aware, cache_aware and decode picks, and --policy round_robin on plain workers made none"},
		{"load_based plain workers had no check", Input{Args: with(plainFleet, "--policy", "load_based"), EngineMaxRunningRequests: ptr(int64(8))},
			"--policy load_based on plain workers made none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, p, err := Migrate(tt.in)
			var errs Errors
			if p != nil || !errors.As(err, &errs) {
				t.Fatalf("want a rejection, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("want %q in:\n%v", tt.want, err)
			}
		})
	}
}
