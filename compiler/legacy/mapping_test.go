package legacy

import (
	"reflect"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// plainFleet is the smallest command line sgl-router starts with: a model and a worker.
var plainFleet = []string{"--model-id", "m", "--worker-urls", "http://10.0.0.1:30000"}

// pdFleet is the smallest prefill/decode command line.
var pdFleet = []string{"--model-id", "m", "--prefill", "http://10.0.0.1:30000", "--decode", "http://10.0.0.2:30000"}

// migrate migrates base followed by extra and fails the test on any error.
func migrate(t *testing.T, base []string, extra ...string) *plan.Plan {
	t.Helper()
	_, p, err := Migrate(Input{Args: append(append([]string{}, base...), extra...)})
	if err != nil {
		t.Fatalf("migrate %q: %v", extra, err)
	}
	return p
}

// selection is the plain group's policy of the only bucket, or the prefill group's.
func selection(p *plan.Plan) plan.Policy {
	g := p.Models[0].Buckets[0].Groups
	if g.PD != nil {
		return g.PD.Prefill.Policy
	}
	return g.Plain.Policy
}

func ptr[T any](v T) *T { return &v }

// Each case is one flag mapping. Expected values come from sgl-router's documented flags
// and defaults (reference/sglang-router.md §1.3), not from the migrator's output.
func TestFlagMappings(t *testing.T) {
	tests := []struct {
		name  string
		base  []string
		extra []string
		got   func(p *plan.Plan) any
		want  any
	}{
		// --policy and its sgl-router default, which differs from the configuration's.
		{"policy omitted is sgl-router's round_robin", plainFleet, nil,
			func(p *plan.Plan) any { return selection(p).Type }, plan.RoundRobin},
		{"policy random", plainFleet, []string{"--policy", "random"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.Random},
		{"policy power_of_two", plainFleet, []string{"--policy", "power_of_two"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.PowerOfTwo},
		{"policy load_based keeps its name", plainFleet, []string{"--policy", "load_based"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.LoadBased},
		{"policy session_aware", plainFleet, []string{"--policy", "session_aware"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.SessionAware},
		{"policy sticky", plainFleet, []string{"--policy", "sticky"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.Sticky},
		{"policy cache_aware", plainFleet, []string{"--policy", "cache_aware"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.CacheAware},
		{"policy with an equals sign", plainFleet, []string{"--policy=random"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.Random},
		{"policy applies to prefill in PD mode", pdFleet, []string{"--policy", "load_based"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.LoadBased},
		{"decode policy defaults to power_of_two", pdFleet, []string{"--policy", "random"},
			func(p *plan.Plan) any { return p.Models[0].Buckets[0].Groups.PD.Decode.Policy.Type }, plan.PowerOfTwo},
		{"decode policy power_of_two", pdFleet, []string{"--decode-policy", "power_of_two"},
			func(p *plan.Plan) any { return p.Models[0].Buckets[0].Groups.PD.Decode.Policy.Type }, plan.PowerOfTwo},

		// Workers.
		{"worker urls become plain engines of the model", plainFleet, []string{"--worker-urls", "http://10.0.0.2:30000/", "https://w3"},
			func(p *plan.Plan) any {
				var got []string
				for _, e := range p.Engines {
					got = append(got, e.URL+" "+string(e.Role)+" "+e.Model)
				}
				return got
			},
			[]string{"http://10.0.0.1:30000 plain m", "http://10.0.0.2:30000 plain m", "https://w3 plain m"}},
		{"prefill bootstrap ports: given, none, absent", []string{"--model-id", "m", "--decode", "http://d"},
			[]string{"--prefill", "http://p1", "9001", "--prefill", "http://p2", "none", "--prefill", "http://p3"},
			func(p *plan.Plan) any {
				var got []int
				for _, e := range p.Engines {
					if e.Role == plan.RolePrefill {
						got = append(got, e.BootstrapPort)
					}
				}
				return got
			},
			// SGLang's default bootstrap port where sgl-router passed none.
			[]int{9001, 8998, 8998}},
		{"PD workers give a prefill/decode bucket over every engine", pdFleet, nil,
			func(p *plan.Plan) any {
				pd := p.Models[0].Buckets[0].Groups.PD
				return []any{pd.Prefill.WorkerIDs == nil, pd.Decode.WorkerIDs == nil, p.Models[0].Buckets[0].ID}
			},
			[]any{true, true, "global"}},

		// Listener.
		{"host and port", plainFleet, []string{"--host", "0.0.0.0", "--port", "8080"},
			func(p *plan.Plan) any { return p.Listen }, "0.0.0.0:8080"},
		{"port alone keeps sgl-router's default host", plainFleet, []string{"--port", "8080"},
			func(p *plan.Plan) any { return p.Listen }, "127.0.0.1:8080"},
		{"an IPv6 host", plainFleet, []string{"--host", "::"},
			func(p *plan.Plan) any { return p.Listen }, "[::]:30000"},
		{"no listener flags is sgl-router's 127.0.0.1:30000", plainFleet, nil,
			func(p *plan.Plan) any { return p.Listen }, "127.0.0.1:30000"},

		// --filter overloaded becomes an admission cap of the selection group only.
		{"filter overloaded", plainFleet, []string{"--filter", "overloaded", "--max-in-flight", "64"},
			func(p *plan.Plan) any { return selection(p).Admission }, plan.Admission{MaxInflightRequests: 64}},
		{"filter overloaded in PD mode caps prefill, not decode", pdFleet, []string{"--filter", "overloaded", "--max-in-flight", "8"},
			func(p *plan.Plan) any {
				pd := p.Models[0].Buckets[0].Groups.PD
				return []int64{pd.Prefill.Policy.Admission.MaxInflightRequests, pd.Decode.Policy.Admission.MaxInflightRequests}
			},
			[]int64{8, 0}},

		// Cache-aware defaults and tuning.
		{"cache_aware defaults", plainFleet, []string{"--policy", "cache_aware"},
			func(p *plan.Plan) any {
				s := selection(p)
				return []any{s.MinMatchedTokens, s.MinMatchRatio == nil, s.CandidateMinWorkers, s.CandidateRatio, s.CandidateMaxWorkers,
					s.SwitchMarginTokens, s.WorkerQueueLimit, s.SaturationQueueFloor, s.MinLoadChoices, *s.PressureGuard, s.PrefixSource.Type}
			},
			[]any{int64(1024), true, 8, 0.05, 32, int64(1024), int64(0), int64(0), 2,
				plan.PressureGuard{Enabled: true, AbsThresholdTokens: 1024, RelThreshold: 1.5}, "local_index"}},
		{"hit gate", plainFleet, []string{"--policy", "cache_aware", "--cache-affinity-min-matched-tokens", "512", "--cache-affinity-min-match-ratio", "0.25"},
			func(p *plan.Plan) any { return []any{selection(p).MinMatchedTokens, *selection(p).MinMatchRatio} }, []any{int64(512), 0.25}},
		{"hit gate of zero tokens", plainFleet, []string{"--policy", "cache_aware", "--cache-affinity-min-matched-tokens", "0"},
			func(p *plan.Plan) any { return selection(p).MinMatchedTokens }, int64(0)},
		{"candidate bounds", plainFleet, []string{"--policy", "cache_aware", "--cache-candidate-min-workers", "4", "--cache-candidate-ratio", "0.1", "--cache-candidate-max-workers", "16"},
			func(p *plan.Plan) any {
				return []any{selection(p).CandidateMinWorkers, selection(p).CandidateRatio, selection(p).CandidateMaxWorkers}
			},
			[]any{4, 0.1, 16}},
		{"candidate ratio of one", plainFleet, []string{"--policy", "cache_aware", "--cache-candidate-ratio", "1"},
			func(p *plan.Plan) any { return selection(p).CandidateRatio }, 1.0},
		{"switch margin", plainFleet, []string{"--policy", "cache_aware", "--cache-switch-margin-tokens", "128"},
			func(p *plan.Plan) any { return selection(p).SwitchMarginTokens }, int64(128)},
		{"soft queue gate and saturation floor", plainFleet, []string{"--policy", "cache_aware", "--worker-queue-limit", "4", "--saturation-queue-floor", "2"},
			func(p *plan.Plan) any {
				return []int64{selection(p).WorkerQueueLimit, selection(p).SaturationQueueFloor}
			}, []int64{4, 2}},
		{"min load choices", plainFleet, []string{"--policy", "cache_aware", "--min-load-choices", "5"},
			func(p *plan.Plan) any { return selection(p).MinLoadChoices }, 5},
		{"pressure guard tuning", plainFleet, []string{"--policy", "cache_aware", "--disable-pressure-guard",
			"--pressure-abs-threshold-tokens", "2048", "--pressure-abs-threshold-ms", "3.5", "--pressure-rel-threshold", "2"},
			func(p *plan.Plan) any { return *selection(p).PressureGuard },
			plan.PressureGuard{Enabled: false, AbsThresholdTokens: 2048, AbsThresholdMS: ptr(3.5), RelThreshold: 2}},
		{"prefix provider radix_tree", plainFleet, []string{"--policy", "cache_aware", "--cache-prefix-provider", "radix_tree"},
			func(p *plan.Plan) any { return *selection(p).PrefixSource }, plan.PrefixSource{Type: "local_index"}},
		{"an indexer endpoint selects the indexer, with its defaults", plainFleet, []string{"--policy", "cache_aware", "--kv-indexer-endpoint", "http://indexer:50051"},
			func(p *plan.Plan) any { return *selection(p).PrefixSource },
			plan.PrefixSource{Type: "remote_indexer", Endpoint: "http://indexer:50051", QueryTimeoutMS: 100, MaxInflightQueries: 32}},
		{"indexer timeout and concurrency", plainFleet, []string{"--policy", "cache_aware", "--cache-prefix-provider", "indexer",
			"--kv-indexer-endpoint", "http://indexer:50051", "--kv-indexer-query-timeout-ms", "75", "--kv-indexer-query-max-inflight", "17"},
			func(p *plan.Plan) any { return *selection(p).PrefixSource },
			plan.PrefixSource{Type: "remote_indexer", Endpoint: "http://indexer:50051", QueryTimeoutMS: 75, MaxInflightQueries: 17}},

		// Session affinity.
		{"session defaults", plainFleet, []string{"--policy", "session_aware"},
			func(p *plan.Plan) any {
				m := p.Models[0]
				return []any{m.SessionIDHeader, m.SessionIdleSecs, m.SessionEvictionIntervalSecs}
			},
			[]any{"x-session-id", 600, 60}},
		{"session flags", plainFleet, []string{"--policy", "session_aware", "--session-id-header", "x-agent-session",
			"--session-idle-secs", "120", "--session-eviction-interval-secs", "15"},
			func(p *plan.Plan) any {
				m := p.Models[0]
				return []any{m.SessionIDHeader, m.SessionIdleSecs, m.SessionEvictionIntervalSecs}
			},
			[]any{"x-agent-session", 120, 15}},
		{"affinity mode strict is what session_aware does", plainFleet, []string{"--policy", "session_aware", "--affinity-mode", "strict"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.SessionAware},
		{"session affinity mode bucket is the configuration's scope", plainFleet, []string{"--policy", "session_aware", "--session-affinity-mode", "bucket"},
			func(p *plan.Plan) any { return selection(p).Type }, plan.SessionAware},

		// Sticky routing.
		{"sticky defaults", plainFleet, []string{"--policy", "sticky"},
			func(p *plan.Plan) any {
				m := p.Models[0]
				return []any{m.RoutingKeyHeader, selection(p).Fallback, m.StickyIdleSecs, m.StickyEvictionIntervalSecs}
			},
			[]any{"x-sgl-routing-key", plan.RoundRobin, 600, 60}},
		{"sticky flags", plainFleet, []string{"--policy", "sticky", "--routing-key-header", "x-tenant",
			"--sticky-fallback-policy", "load_based", "--sticky-idle-secs", "120", "--sticky-eviction-interval-secs", "15"},
			func(p *plan.Plan) any {
				m := p.Models[0]
				return []any{m.RoutingKeyHeader, selection(p).Fallback, m.StickyIdleSecs, m.StickyEvictionIntervalSecs}
			},
			[]any{"x-tenant", plan.LoadBased, 120, 15}},
	}
	for _, fb := range []plan.PolicyType{plan.RoundRobin, plan.Random, plan.PowerOfTwo, plan.LoadBased} {
		tests = append(tests, struct {
			name  string
			base  []string
			extra []string
			got   func(p *plan.Plan) any
			want  any
		}{"sticky fallback " + string(fb), plainFleet, []string{"--policy", "sticky", "--sticky-fallback-policy", string(fb)},
			func(p *plan.Plan) any { return selection(p).Fallback }, fb})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := migrate(t, tt.base, tt.extra...)
			if got := tt.got(p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

// A migrated configuration sets only what the command line said and what differs from
// the configuration's defaults: tuning of other policies never leaks in.
func TestNoTuningOutsideItsPolicy(t *testing.T) {
	src, p, err := Migrate(Input{Args: append(append([]string{}, plainFleet...), "--policy", "power_of_two")})
	if err != nil {
		t.Fatal(err)
	}
	s := selection(p)
	if s.PressureGuard != nil || s.PrefixSource != nil || s.Fallback != "" || s.MinMatchedTokens != 0 || s.Admission != (plan.Admission{}) {
		t.Errorf("power_of_two carries foreign settings: %+v", s)
	}
	for _, absent := range []string{"session_", "sticky_", "routing_key", "listen"} {
		if strings.Contains(string(src), absent) {
			t.Errorf("output sets %s although no flag asked for it:\n%s", absent, src)
		}
	}
}
