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
		// sgl-router de-duplicated its worker list after dropping trailing slashes.
		{"a worker listed twice is one engine", plainFleet, []string{"--worker-urls", "http://10.0.0.1:30000/", "http://10.0.0.2:30000", "http://10.0.0.2:30000"},
			func(p *plan.Plan) any {
				var got []string
				for _, e := range p.Engines {
					got = append(got, e.ID+" "+e.URL)
				}
				return got
			},
			[]string{"worker-1 http://10.0.0.1:30000", "worker-2 http://10.0.0.2:30000"}},
		{"a prefill or decode worker listed twice is one engine", pdFleet, []string{"--prefill", "http://10.0.0.1:30000/", "--decode", "http://10.0.0.2:30000"},
			func(p *plan.Plan) any { return len(p.Engines) }, 2},
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
				return []any{*s.MinMatchedTokens, s.MinMatchRatio == nil, s.CandidateMinWorkers, s.CandidateRatio, s.CandidateMaxWorkers,
					*s.SwitchMarginTokens, s.WorkerQueueLimit, s.SaturationQueueFloor, s.MinLoadChoices, *s.PressureGuard, s.PrefixSource.Type}
			},
			[]any{int64(1024), true, 8, 0.05, 32, int64(1024), int64(0), int64(0), 2,
				plan.PressureGuard{Enabled: true, AbsThresholdTokens: 1024, RelThreshold: 1.5}, "approximate"}},
		{"hit gate", plainFleet, []string{"--policy", "cache_aware", "--cache-affinity-min-matched-tokens", "512", "--cache-affinity-min-match-ratio", "0.25"},
			func(p *plan.Plan) any { return []any{*selection(p).MinMatchedTokens, *selection(p).MinMatchRatio} }, []any{int64(512), 0.25}},
		{"hit gate of zero tokens", plainFleet, []string{"--policy", "cache_aware", "--cache-affinity-min-matched-tokens", "0"},
			func(p *plan.Plan) any { return *selection(p).MinMatchedTokens }, int64(0)},
		{"candidate bounds", plainFleet, []string{"--policy", "cache_aware", "--cache-candidate-min-workers", "4", "--cache-candidate-ratio", "0.1", "--cache-candidate-max-workers", "16"},
			func(p *plan.Plan) any {
				return []any{selection(p).CandidateMinWorkers, selection(p).CandidateRatio, selection(p).CandidateMaxWorkers}
			},
			[]any{4, 0.1, 16}},
		{"candidate ratio of one", plainFleet, []string{"--policy", "cache_aware", "--cache-candidate-ratio", "1"},
			func(p *plan.Plan) any { return selection(p).CandidateRatio }, 1.0},
		{"switch margin", plainFleet, []string{"--policy", "cache_aware", "--cache-switch-margin-tokens", "128"},
			func(p *plan.Plan) any { return *selection(p).SwitchMarginTokens }, int64(128)},
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
			func(p *plan.Plan) any { return *selection(p).PrefixSource },
			plan.PrefixSource{Type: "approximate", TTLSecs: 120, BlockSize: 16, Share: plan.ShareNone, SpeculativeTTLMS: 30_000}},
		{"classic cache threshold", plainFleet, []string{"--policy", "cache_aware", "--cache-threshold", "0.3"},
			func(p *plan.Plan) any { return *selection(p).MinMatchRatio }, 0.3},

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
	if s.PressureGuard != nil || s.PrefixSource != nil || s.Fallback != "" || s.MinMatchedTokens != nil || s.Admission != (plan.Admission{}) {
		t.Errorf("power_of_two carries foreign settings: %+v", s)
	}
	for _, absent := range []string{"session_", "sticky_", "routing_key", "listen"} {
		if strings.Contains(string(src), absent) {
			t.Errorf("output sets %s although no flag asked for it:\n%s", absent, src)
		}
	}
}

// sgl-router's era-3 selection checked each engine's reported capacity before
// power_of_two, session_aware, cache_aware and decode picks (reference/sglang-router.md
// §1.7, §2.2): running + 1 <= max_running_requests, which is running below the cap, and
// KV tokens against max_total_num_tokens. --engine-max-* give those limits, and they cap
// exactly the groups whose selection made the check.
func TestCapacityCaps(t *testing.T) {
	caps := plan.Admission{MaxRunningRequests: 256, MaxKVTokens: 1 << 20}
	tests := []struct {
		name              string
		args              []string
		selection, decode plan.Admission
	}{
		{"power_of_two", with(plainFleet, "--policy", "power_of_two"), caps, plan.Admission{}},
		{"session_aware", with(plainFleet, "--policy", "session_aware"), caps, plan.Admission{}},
		{"cache_aware, beside --max-in-flight", with(plainFleet, "--policy", "cache_aware", "--filter", "overloaded", "--max-in-flight", "64"),
			plan.Admission{MaxRunningRequests: 256, MaxKVTokens: 1 << 20, MaxInflightRequests: 64}, plan.Admission{}},
		{"round_robin prefill had none, decode had one", with(pdFleet, "--policy", "round_robin"), plan.Admission{}, caps},
		{"power_of_two prefill and decode", with(pdFleet, "--policy", "power_of_two"), caps, caps},
		{"load_based prefill had none", with(pdFleet, "--policy", "load_based"), plan.Admission{}, caps},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, p, err := Migrate(Input{Args: tt.args, EngineMaxRunningRequests: ptr(int64(256)), EngineMaxKVTokens: ptr(int64(1 << 20))})
			if err != nil {
				t.Fatal(err)
			}
			if got := selection(p).Admission; got != tt.selection {
				t.Errorf("selection admission: got %+v, want %+v", got, tt.selection)
			}
			if pd := p.Models[0].Buckets[0].Groups.PD; pd != nil && pd.Decode.Policy.Admission != tt.decode {
				t.Errorf("decode admission: got %+v, want %+v", pd.Decode.Policy.Admission, tt.decode)
			}
			flat := strings.Join(strings.Fields(string(src)), " ")
			for _, want := range []string{"max_running_requests: 256 // --engine-max-running-requests", "max_kv_tokens: 1048576 // --engine-max-kv-tokens"} {
				if !strings.Contains(flat, want) {
					t.Errorf("want %q in:\n%s", want, src)
				}
			}
		})
	}

	// One flag without the other caps what it gives.
	_, p, err := Migrate(Input{Args: with(plainFleet, "--policy", "power_of_two"), EngineMaxKVTokens: ptr(int64(4096))})
	if err != nil {
		t.Fatal(err)
	}
	if got := selection(p).Admission; got != (plan.Admission{MaxKVTokens: 4096}) {
		t.Errorf("KV tokens only: %+v", got)
	}
}

// Every group of a bucket file gets the caps its selection had the check for.
func TestCapacityCapsOfBucketFile(t *testing.T) {
	in := Input{Args: with(pdWorkers, "--policy", "cache_aware"), BucketConfig: bucketFileOf(t, twoPairs), Pairs: []string{"p-short=d-short", "p-long=d-long"},
		EngineMaxRunningRequests: ptr(int64(128))}
	_, p, err := Migrate(in)
	if err != nil {
		t.Fatal(err)
	}
	b := p.Models[0].Buckets
	want := []plan.Admission{
		{MaxRunningRequests: 128, MaxPendingPrefillTokens: 16384}, {MaxRunningRequests: 128},
		{MaxRunningRequests: 128}, {MaxRunningRequests: 128},
	}
	got := []plan.Admission{b[0].Groups.PD.Prefill.Policy.Admission, b[0].Groups.PD.Decode.Policy.Admission,
		b[1].Groups.PD.Prefill.Policy.Admission, b[1].Groups.PD.Decode.Policy.Admission}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestShutdownDrainIsTheDelay: sgl-router's --shutdown-drain-secs kept serving with
// /readyz answering 503 before its drain, which is what shutdown_delay_secs does.
func TestShutdownDrainIsTheDelay(t *testing.T) {
	p := migrate(t, plainFleet, "--shutdown-drain-secs", "15")
	if p.ShutdownDelaySecs != 15 {
		t.Fatalf("shutdown_delay_secs %d, want 15", p.ShutdownDelaySecs)
	}
}
