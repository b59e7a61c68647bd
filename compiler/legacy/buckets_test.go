package legacy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// pdWorkers are four prefill/decode workers that the bucket files below refer to by URL,
// as sgl-router's worker_ids do.
var pdWorkers = []string{"--model-id", "m",
	"--prefill", "http://p1:30000", "--prefill", "http://p2:30000",
	"--decode", "http://d1:30000", "--decode", "http://d2:30000"}

// twoPairs is the design's short/long example (docs/design.md, Buckets) as legacy per-stage
// buckets.
const twoPairs = `{"buckets": [
  {"id": "p-short", "stage": "prefill", "rank": 10, "worker_ids": ["http://p1:30000"],
   "max_extend_tokens": 4096, "max_pending_prefill_tokens": 16384},
  {"id": "p-long", "stage": "prefill", "rank": 20, "worker_ids": ["http://p2:30000/"],
   "min_extend_tokens": 1024, "max_context_tokens": 131072},
  {"id": "d-short", "stage": "decode", "rank": 10, "worker_ids": ["http://d1:30000"], "max_context_tokens": 8192},
  {"id": "d-long", "stage": "decode", "rank": 20, "worker_ids": ["http://d2:30000"], "max_context_tokens": 131072}
]}`

func bucketFileOf(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "buckets.json")
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestPairedBuckets(t *testing.T) {
	in := Input{Args: pdWorkers, BucketConfig: bucketFileOf(t, twoPairs), Pairs: []string{"p-short=d-short", "p-long=d-long"}}
	_, p, err := Migrate(in)
	if err != nil {
		t.Fatal(err)
	}
	b := p.Models[0].Buckets
	if len(b) != 2 {
		t.Fatalf("want one bucket per pair, got %d", len(b))
	}
	short, long := b[0], b[1]
	// The prefill extend range bounds the input; the decode context bounds input plus
	// output; the rank both stages share is the bucket's.
	if short.ID != "p-short+d-short" || short.Rank != 10 || short.Limits.Min != 0 || *short.Limits.Max != 4096 || *short.MaxContextTokens != 8192 {
		t.Errorf("short bucket: %+v", short)
	}
	// A prefill context bound sgl-router compared with the input alone bounds the input.
	if long.ID != "p-long+d-long" || long.Rank != 20 || long.Limits.Min != 1024 || *long.Limits.Max != 131072 || *long.MaxContextTokens != 131072 {
		t.Errorf("long bucket: %+v", long)
	}
	if got := [][]string{short.Groups.PD.Prefill.WorkerIDs, short.Groups.PD.Decode.WorkerIDs, long.Groups.PD.Prefill.WorkerIDs, long.Groups.PD.Decode.WorkerIDs}; !reflect.DeepEqual(got,
		[][]string{{"prefill-1"}, {"decode-1"}, {"prefill-2"}, {"decode-2"}}) {
		t.Errorf("membership: %v", got)
	}
	// A configured pending-prefill budget is carried into the prefill group's admission.
	if got := short.Groups.PD.Prefill.Policy.Admission; got != (plan.Admission{MaxPendingPrefillTokens: 16384}) {
		t.Errorf("short prefill admission: %+v", got)
	}
	if got := short.Groups.PD.Decode.Policy.Admission; got != (plan.Admission{}) {
		t.Errorf("decode admission must stay empty: %+v", got)
	}
}

func TestBucketConfigAmongLegacyFlags(t *testing.T) {
	file := bucketFileOf(t, twoPairs)
	_, p, err := Migrate(Input{Args: with(pdWorkers, "--bucket-config", file), Pairs: []string{"p-short=d-short", "p-long=d-long"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Models[0].Buckets) != 2 {
		t.Errorf("the legacy --bucket-config must be read like migrate's own")
	}
	_, _, err = Migrate(Input{Args: with(pdWorkers, "--bucket-config", file), BucketConfig: file})
	if err == nil || !strings.Contains(err.Error(), "give it once") {
		t.Errorf("a bucket file given twice must be rejected, got %v", err)
	}
}

// In a plain fleet, prefill buckets hold the plain workers, as in sgl-router.
func TestPlainBuckets(t *testing.T) {
	file := bucketFileOf(t, `{"ttft_slo_policy": "disabled", "buckets": [
	  {"id": "short", "stage": "prefill", "rank": 1, "worker_ids": ["http://w1"], "max_extend_tokens": 2048, "max_context_tokens": 1024},
	  {"id": "rest", "stage": "prefill", "rank": 2, "worker_ids": [], "max_pending_prefill_tokens": 4096}]}`)
	_, p, err := Migrate(Input{Args: []string{"--model-id", "m", "--worker-urls", "http://w1", "http://w2", "--policy", "load_based"}, BucketConfig: file})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Models[0].Buckets
	if len(b) != 2 || b[0].ID != "short" || b[0].Rank != 1 || b[1].ID != "rest" || b[1].Rank != 2 {
		t.Fatalf("buckets: %+v", b)
	}
	// The smaller of the extend and context bounds, both on the input length.
	if *b[0].Limits.Max != 1024 || b[0].MaxContextTokens != nil {
		t.Errorf("short limits: %+v, context %v", b[0].Limits, b[0].MaxContextTokens)
	}
	if g := b[0].Groups.Plain; g == nil || !reflect.DeepEqual(g.WorkerIDs, []string{"worker-1"}) || g.Policy.Type != plan.LoadBased {
		t.Errorf("short group: %+v", g)
	}
	// An explicit empty membership stays empty: no engine, not every engine.
	if g := b[1].Groups.Plain; g.WorkerIDs == nil || len(g.WorkerIDs) != 0 || g.Policy.Admission.MaxPendingPrefillTokens != 4096 {
		t.Errorf("rest group: %+v", g)
	}
}

// Without decode buckets, sgl-router used every decode worker for the decode stage.
func TestPrefillOnlyBucketsInPDMode(t *testing.T) {
	file := bucketFileOf(t, `{"buckets": [{"id": "p", "stage": "prefill", "rank": 0, "worker_ids": ["http://p1:30000", "http://p2:30000"]}]}`)
	_, p, err := Migrate(Input{Args: pdWorkers, BucketConfig: file})
	if err != nil {
		t.Fatal(err)
	}
	pd := p.Models[0].Buckets[0].Groups.PD
	if p.Models[0].Buckets[0].ID != "p" || len(pd.Prefill.WorkerIDs) != 2 || pd.Decode.WorkerIDs != nil {
		t.Errorf("bucket: %+v / %+v", p.Models[0].Buckets[0], pd)
	}
}

func TestBucketRejections(t *testing.T) {
	spec := func(id, stage string, rank int, worker string, extra string) string {
		return `{"id": "` + id + `", "stage": "` + stage + `", "rank": ` + strconv.Itoa(rank) + `, "worker_ids": ["` + worker + `"]` + extra + `}`
	}
	file := func(specs ...string) string { return `{"buckets": [` + strings.Join(specs, ",") + `]}` }
	p1 := spec("p-short", "prefill", 1, "http://p1:30000", "")
	d1 := spec("d-short", "decode", 1, "http://d1:30000", "")
	tests := []struct {
		name    string
		args    []string
		content string
		pairs   []string
		want    string
	}{
		{"an unpaired bucket names the pairs still needed", pdWorkers, file(p1, d1, spec("d-long", "decode", 2, "http://d2:30000", "")), []string{"p-short=d-short"},
			`unpaired buckets: decode bucket "d-long"; a prefill/decode bucket needs both stages, and migrate never guesses which belong together: add --pair PREFILL=DECODE for each (prefill buckets: p-short; decode buckets: d-short, d-long)`},
		{"no pairs at all", pdWorkers, file(p1, d1), nil, `unpaired buckets: prefill bucket "p-short", decode bucket "d-short"`},
		{"matching names are not a pairing", pdWorkers, file(spec("short", "prefill", 1, "http://p1:30000", ""), spec("short-d", "decode", 1, "http://d1:30000", "")), nil, "unpaired buckets"},
		{"a pair with an unknown bucket", pdWorkers, file(p1, d1), []string{"p-short=d-nope"}, `has no decode bucket "d-nope" (decode buckets: d-short)`},
		{"a pair in the wrong order", pdWorkers, file(p1, d1), []string{"d-short=p-short"}, `has no prefill bucket "d-short"`},
		{"a malformed pair", pdWorkers, file(p1, d1), []string{"p-short"}, "want PREFILL_BUCKET=DECODE_BUCKET"},
		{"a pair given twice", pdWorkers, file(p1, d1), []string{"p-short=d-short", "p-short=d-short"}, "is given more than once"},
		{"ranks that differ", pdWorkers, file(p1, spec("d-short", "decode", 2, "http://d1:30000", "")), []string{"p-short=d-short"}, "prefill rank 1 and decode rank 2 differ"},
		{"a decode range over the expected peak", pdWorkers, file(p1, spec("d-short", "decode", 1, "http://d1:30000", `, "max_sequence_tokens": 8192`)), []string{"p-short=d-short"},
			"min_sequence_tokens/max_sequence_tokens cannot become a bucket range"},
		{"a TTFT estimate of 0", pdWorkers, file(spec("p-short", "prefill", 1, "http://p1:30000", `, "ttft_p95_at_capacity_ms": 0`)), nil,
			"ttft_p95_at_capacity_ms 0 cannot be migrated: an estimate must be positive"},
		{"a TTFT estimate above int64", pdWorkers, file(spec("p-short", "prefill", 1, "http://p1:30000", `, "ttft_p95_at_capacity_ms": 9223372036854775808`)), nil,
			"ttft_p95_at_capacity_ms 9223372036854775808 cannot be migrated"},
		{"a negative TPS estimate", pdWorkers, file(p1, spec("d-short", "decode", 1, "http://d1:30000", `, "tps_p05_at_capacity": -2.5`)), []string{"p-short=d-short"},
			"tps_p05_at_capacity -2.5 cannot be migrated: an estimate must be positive"},
		{"a pair that takes no request", pdWorkers, file(spec("p-short", "prefill", 1, "http://p1:30000", `, "min_extend_tokens": 9000`), spec("d-short", "decode", 1, "http://d1:30000", `, "max_context_tokens": 8192`)), []string{"p-short=d-short"},
			"takes no request: decode max_context_tokens (8192) is below prefill min_extend_tokens (9000)"},
		// Ranks are unique per stage and a pair's ranks are equal, so a bucket is in one pair.
		{"a bucket in two pairs", pdWorkers, file(p1, d1, spec("d-long", "decode", 2, "http://d2:30000", "")), []string{"p-short=d-short", "p-short=d-long"},
			`--pair p-short=d-long: prefill bucket "p-short" is already in --pair p-short=d-short: each bucket is in one pair`},
		{"pairs without decode buckets", pdWorkers, file(p1), []string{"p-short=d-short"}, "has no decode buckets to pair with"},
		{"pairs in a plain fleet", plainFleet, file(spec("p", "prefill", 1, "http://10.0.0.1:30000", "")), []string{"p=d"}, "the workers are plain"},
		{"decode buckets in a plain fleet", plainFleet, file(spec("p", "prefill", 1, "http://10.0.0.1:30000", ""), spec("d", "decode", 1, "http://10.0.0.1:30000", "")), nil, `decode bucket "d" has no decode workers`},
		{"a worker the command line does not give", pdWorkers, file(spec("p-short", "prefill", 1, "http://p9:30000", "")), nil, "lists worker http://p9:30000, which the command line does not give"},
		{"a worker of the other role", pdWorkers, file(spec("p-short", "prefill", 1, "http://d1:30000", "")), nil, "a decode worker (--decode), but its workers are prefill workers"},

		// sgl-router's own validation of the file.
		{"unknown field", pdWorkers, file(spec("p", "prefill", 1, "http://p1:30000", `, "policy": "random"`)), nil, `unknown field "policy"`},
		{"not JSON", pdWorkers, `{"buckets": [`, nil, "is not valid bucket JSON"},
		{"trailing data", pdWorkers, file(p1) + "{}", nil, "data after the top-level object"},
		{"missing rank", pdWorkers, `{"buckets": [{"id": "p", "stage": "prefill", "worker_ids": []}]}`, nil, `bucket "p": missing field rank`},
		{"unknown stage", pdWorkers, file(spec("p", "plain", 1, "http://p1:30000", "")), nil, `unknown stage "plain"`},
		{"duplicate id", pdWorkers, file(p1, spec("p-short", "prefill", 2, "http://p2:30000", "")), nil, "duplicate bucket id"},
		{"empty id", pdWorkers, file(spec("", "prefill", 1, "http://p1:30000", "")), nil, "bucket ids must not be empty"},
		{"rank unique per stage", pdWorkers, file(p1, spec("p-long", "prefill", 1, "http://p2:30000", "")), nil, "ranks are unique per stage"},
		{"a worker in two buckets of a stage", pdWorkers, file(p1, spec("p-long", "prefill", 2, "http://p1:30000/", "")), nil, "a worker is in at most one bucket per stage"},
		{"a decode field on a prefill bucket", pdWorkers, file(spec("p", "prefill", 1, "http://p1:30000", `, "max_sequence_tokens": 10`)), nil, "max_sequence_tokens is not a prefill bucket field"},
		{"a prefill field on a decode bucket", pdWorkers, file(p1, spec("d", "decode", 1, "http://d1:30000", `, "max_pending_prefill_tokens": 10`)), nil, "max_pending_prefill_tokens is not a decode bucket field"},
		{"an empty extend range", pdWorkers, file(spec("p", "prefill", 1, "http://p1:30000", `, "min_extend_tokens": 10, "max_extend_tokens": 5`)), nil, "min_extend_tokens (10) is greater than max_extend_tokens (5)"},
		{"no prefill bucket", pdWorkers, file(d1), nil, "no prefill bucket"},

		// sgl-router's u64 token fields above the configuration's int64.
		{"a pending budget above int64", pdWorkers, file(spec("p", "prefill", 1, "http://p1:30000", `, "max_pending_prefill_tokens": 9223372036854775808`)), nil,
			`bucket "p": max_pending_prefill_tokens 9223372036854775808 cannot be migrated: the configuration's integers are at most 9223372036854775807`},
		{"an extend bound of u64 max", pdWorkers, file(spec("p", "prefill", 1, "http://p1:30000", `, "max_extend_tokens": 18446744073709551615`)), nil,
			`bucket "p": max_extend_tokens 18446744073709551615 cannot be migrated`},
		{"a minimum above int64", pdWorkers, file(spec("p", "prefill", 1, "http://p1:30000", `, "min_extend_tokens": 9223372036854775808`)), nil,
			`bucket "p": min_extend_tokens 9223372036854775808 cannot be migrated`},
		{"a context above int64", pdWorkers, file(p1, spec("d", "decode", 1, "http://d1:30000", `, "max_context_tokens": 9223372036854775808`)), []string{"p-short=d"},
			`bucket "d": max_context_tokens 9223372036854775808 cannot be migrated`},
		{"a bucket id with a line break", pdWorkers, file(spec(`p\n// x`, "prefill", 1, "http://p1:30000", "")), nil,
			`bucket "p\n// x": the id contains a control character`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, p, err := Migrate(Input{Args: tt.args, BucketConfig: bucketFileOf(t, tt.content), Pairs: tt.pairs})
			var errs Errors
			if p != nil || !errors.As(err, &errs) {
				t.Fatalf("want Errors, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("want %q in:\n%v", tt.want, err)
			}
		})
	}
}

// The largest value the configuration holds migrates unchanged.
func TestBucketValuesAtInt64Max(t *testing.T) {
	const maxInt64 = 9223372036854775807
	file := bucketFileOf(t, `{"buckets": [{"id": "p", "stage": "prefill", "rank": 1, "worker_ids": ["http://w"],
	  "max_extend_tokens": 9223372036854775807, "max_pending_prefill_tokens": 9223372036854775807}]}`)
	_, p, err := Migrate(Input{Args: []string{"--model-id", "m", "--worker-urls", "http://w"}, BucketConfig: file})
	if err != nil {
		t.Fatal(err)
	}
	b := p.Models[0].Buckets[0]
	if *b.Limits.Max != maxInt64 || b.Groups.Plain.Policy.Admission.MaxPendingPrefillTokens != maxInt64 {
		t.Errorf("got limits %+v, admission %+v", b.Limits, b.Groups.Plain.Policy.Admission)
	}
}

// A bucket whose context bound is below its minimum is reported with the field that bounds
// it.
func TestEmptyInputRangeNamesItsBound(t *testing.T) {
	file := bucketFileOf(t, `{"buckets": [{"id": "p", "stage": "prefill", "rank": 1, "worker_ids": ["http://w"],
	  "min_extend_tokens": 2048, "max_extend_tokens": 4096, "max_context_tokens": 1024}]}`)
	_, _, err := Migrate(Input{Args: []string{"--model-id", "m", "--worker-urls", "http://w"}, BucketConfig: file})
	if err == nil || !strings.Contains(err.Error(), `bucket "p" takes no request: its max_context_tokens (1024) is below its min_extend_tokens (2048)`) {
		t.Errorf("got %v", err)
	}
}

func TestUnreadableBucketFile(t *testing.T) {
	_, _, err := Migrate(Input{Args: pdWorkers, BucketConfig: filepath.Join(t.TempDir(), "missing.json")})
	var errs Errors
	if !errors.Is(err, os.ErrNotExist) || errors.As(err, &errs) {
		t.Fatalf("a read failure is a wrapped I/O error, not a rejection: %v", err)
	}
}

// A bucket file's SLO policies become the model's preferences and its per-stage estimates
// the paired bucket's: TTFT from the prefill bucket, throughput from the decode bucket. A
// policy no bucket has an estimate for stays disabled, with a note.
func TestSLOMigrated(t *testing.T) {
	content := `{"ttft_slo_policy": "slo_first", "tps_slo_policy": "best_effort", "buckets": [
  {"id": "p-fast", "stage": "prefill", "rank": 1, "worker_ids": ["http://p1:30000"], "ttft_p95_at_capacity_ms": 80},
  {"id": "p-slow", "stage": "prefill", "rank": 2, "worker_ids": ["http://p2:30000"], "ttft_p95_at_capacity_ms": 400},
  {"id": "d-fast", "stage": "decode", "rank": 1, "worker_ids": ["http://d1:30000"], "tps_p05_at_capacity": 45.5},
  {"id": "d-slow", "stage": "decode", "rank": 2, "worker_ids": ["http://d2:30000"]}
]}`
	src, p, err := Migrate(Input{Args: pdWorkers, BucketConfig: bucketFileOf(t, content), Pairs: []string{"p-fast=d-fast", "p-slow=d-slow"}})
	if err != nil {
		t.Fatal(err)
	}
	m := p.Models[0]
	if m.SLO != (plan.SLOPreferences{TTFT: plan.SLOFirst, TPS: plan.SLOBestEffort}) {
		t.Errorf("preferences %+v", m.SLO)
	}
	fast, slow := m.Buckets[0].Estimates, m.Buckets[1].Estimates
	if fast == nil || *fast.TTFTMS != 80 || *fast.TPS != 45.5 || fast.Learn != nil {
		t.Errorf("fast estimates %+v", fast)
	}
	if slow == nil || *slow.TTFTMS != 400 || slow.TPS != nil {
		t.Errorf("slow estimates %+v", slow)
	}
	for _, want := range []string{"ttft_ms: 80", "p-fast.ttft_p95_at_capacity_ms", "45.5", "d-fast.tps_p05_at_capacity", "ttft: \"slo_first\"", "SLO estimates: sgl-router ordered prefill buckets"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("migrated source lacks %q:\n%s", want, src)
		}
	}

	// Without any throughput estimate, tps_slo_policy changed no order: left disabled.
	content = `{"ttft_slo_policy": "disabled", "tps_slo_policy": "slo_first", "buckets": [
  {"id": "p", "stage": "prefill", "rank": 1, "worker_ids": ["http://p1:30000"]}]}`
	src, p, err = Migrate(Input{Args: pdWorkers, BucketConfig: bucketFileOf(t, content)})
	if err != nil {
		t.Fatal(err)
	}
	if m := p.Models[0]; m.SLO.TPS != plan.SLODisabled || m.SLO.TTFT != plan.SLODisabled {
		t.Errorf("preferences %+v, want both disabled", m.SLO)
	}
	if !strings.Contains(string(src), `tps_slo_policy "slo_first" is left disabled: no migrated bucket has a`) {
		t.Errorf("no note on the dropped preference:\n%s", src)
	}
}
