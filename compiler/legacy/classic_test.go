package legacy

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// TestCacheAwareIndexChoice: cache_aware learns from dispatches unless migrate is told the
// engines publish KV events.
func TestCacheAwareIndexChoice(t *testing.T) {
	args := with(plainFleet, "--policy", "cache_aware")
	_, p, err := Migrate(Input{Args: args, EnginesPublishKVEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := *selection(p).PrefixSource; got != (plan.PrefixSource{Type: "local_index"}) {
		t.Fatalf("with --engines-publish-kv-events: %+v, want the local index", got)
	}
	src, p, err := Migrate(Input{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if got := selection(p).PrefixSource; got.Type != "approximate" || got.SpeculativeTTLMS != 30_000 {
		t.Fatalf("without it: %+v, want approximate with 30 s speculative entries", got)
	}
	if !regexp.MustCompile(`type: +"approximate" +// --policy cache_aware: learned from the router's dispatches`).Match(src) ||
		!regexp.MustCompile(`speculative_ttl_ms: 30000 +// sgl-router inserted each request into its tree as it picked it`).Match(src) {
		t.Fatalf("the source's comment does not name the flag:\n%s", src)
	}
}

// TestClassicFlagsRefused: each classic tuning flag the router replaced is refused with
// its reason and what to use instead; every problem of a stage is reported at once. The
// eviction interval is refused once the policy is known, since under SMG's manual policy
// it maps (TestSMGPolicies).
func TestClassicFlagsRefused(t *testing.T) {
	_, _, err := Migrate(Input{Args: with(plainFleet, "--policy", "cache_aware",
		"--balance-abs-threshold", "64", "--balance-rel-threshold", "1.5", "--eviction-interval", "120", "--max-tree-size", "67108864")})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 3 {
		t.Fatalf("err = %v, want 3 problems", err)
	}
	for i, want := range []string{
		"--balance-abs-threshold cannot be migrated: sgl-router's classic cache_aware left the cache for the least-loaded worker",
		"--balance-rel-threshold cannot be migrated: ",
		"--max-tree-size cannot be migrated: it counts characters of request text per worker",
	} {
		if !strings.HasPrefix(errs[i].Error(), want) {
			t.Errorf("problem %d = %q, want it to start %q", i, errs[i], want)
		}
	}
	_, _, err = Migrate(Input{Args: with(plainFleet, "--policy", "cache_aware", "--eviction-interval", "120")})
	if err == nil || !strings.HasPrefix(err.Error(), "--eviction-interval cannot be migrated: sgl-router trimmed each worker's tree") {
		t.Fatalf("--eviction-interval under cache_aware: err = %v, want its refusal", err)
	}
}

func TestClassicRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   Input
		want string
	}{
		{"threshold needs cache_aware", Input{Args: with(plainFleet, "--cache-threshold", "0.3")}, "--cache-threshold requires --policy cache_aware"},
		{"threshold is a ratio", Input{Args: with(plainFleet, "--policy", "cache_aware", "--cache-threshold", "1.5")}, "--cache-threshold must be finite and in [0, 1]"},
		{"threshold is not a number", Input{Args: with(plainFleet, "--policy", "cache_aware", "--cache-threshold", "half")}, `invalid value "half" for --cache-threshold: not a number`},
		{"one ratio gate", Input{Args: with(plainFleet, "--policy", "cache_aware", "--cache-threshold", "0.3", "--cache-affinity-min-match-ratio", "0.2")},
			"--cache-threshold and --cache-affinity-min-match-ratio both set"},
		{"events need cache_aware", Input{Args: with(plainFleet, "--policy", "random"), EnginesPublishKVEvents: true},
			"--engines-publish-kv-events chooses the prefix index of --policy cache_aware, and the command line has --policy random"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Migrate(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
