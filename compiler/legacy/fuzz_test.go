package legacy

import (
	"strings"
	"testing"
)

// FuzzMigrate feeds arbitrary command lines to the migrator. Whatever the input, it either
// rejects it or returns a configuration, never both, never panics, and never produces a
// configuration that does not compile: the last would be an internal error.
func FuzzMigrate(f *testing.F) {
	f.Add(strings.Join(everything, "\x00"))
	f.Add(strings.Join(with(pdFleet, "--policy", "sticky", "--sticky-idle-secs", "1"), "\x00"))
	f.Add(strings.Join(with(plainFleet, "--policy", "session_aware", "--session-id-header", "x"), "\x00"))
	f.Add("--model-id\x00m\x00--worker-urls\x00http://[::1]:1\x00--host\x00::1")
	// Model names that are also labels of dropped options in a configuration.
	for _, id := range []string{"fuse", "filter", "filters", "stable_pair", "affinity_mode", "prefix_cache_min_share"} {
		f.Add("--model-id\x00" + id + "\x00--worker-urls\x00http://w")
	}
	// One past the largest integer the configuration holds.
	f.Add("--model-id\x00m\x00--worker-urls\x00http://w\x00--filter\x00overloaded\x00--max-in-flight\x009223372036854775808")
	f.Add("--model-id\x00m\x00--worker-urls\x00http://w\x00--policy\x00cache_aware\x00--cache-switch-margin-tokens\x009223372036854775807")
	// Values that end up in comments.
	f.Add("--model-id\x00m\nx: 1\x00--worker-urls\x00http://w")
	f.Add("--model-id\x00m\u2028x\x00--worker-urls\x00http://w\x00--host\x00h\u0085")
	f.Add("--model-id\x00m\x00--prefill\x00http://p\x00none\x00--prefill\x00http://p/\x00--decode\x00http://d")
	f.Fuzz(func(t *testing.T, line string) {
		src, p, err := Migrate(Input{Args: strings.Split(line, "\x00")})
		if (err == nil) != (src != nil && p != nil) {
			t.Fatalf("want a configuration or an error, got %q / %v / %v", src, p, err)
		}
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatal(err)
		}
	})
}

// FuzzBucketFile feeds arbitrary bucket files and --pair lists to the migrator of a
// prefill/decode fleet, with the same promise as FuzzMigrate.
func FuzzBucketFile(f *testing.F) {
	f.Add(twoPairs, "p-short=d-short,p-long=d-long")
	// One past the largest integer the configuration holds, and u64's largest.
	f.Add(`{"buckets": [{"id": "p", "stage": "prefill", "rank": 1, "worker_ids": ["http://p1:30000"], "max_pending_prefill_tokens": 9223372036854775808}]}`, "")
	f.Add(`{"buckets": [{"id": "p", "stage": "prefill", "rank": 1, "worker_ids": ["http://p1:30000"], "max_extend_tokens": 18446744073709551615}]}`, "")
	f.Add(`{"buckets": [{"id": "p", "stage": "prefill", "rank": 1, "worker_ids": [], "max_extend_tokens": 9223372036854775807, "max_context_tokens": 9223372036854775807}]}`, "")
	f.Add(`{"buckets": [{"id": "p\n", "stage": "prefill", "rank": 1, "worker_ids": []}, {"id": "d", "stage": "decode", "rank": 1, "worker_ids": []}]}`, "p\n=d")
	f.Fuzz(func(t *testing.T, content, pairs string) {
		in := Input{Args: pdWorkers, BucketConfig: bucketFileOf(t, content), EngineMaxKVTokens: ptr(int64(4096))}
		if pairs != "" {
			in.Pairs = strings.Split(pairs, ",")
		}
		src, p, err := Migrate(in)
		if (err == nil) != (src != nil && p != nil) {
			t.Fatalf("want a configuration or an error, got %q / %v / %v", src, p, err)
		}
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatal(err)
		}
	})
}
