package bucket

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
)

func TestResolve(t *testing.T) {
	e := newEnv(t, eng("A", plan.RolePlain))
	some := []string{"A"}
	withRankMin := func(b plan.Bucket, rank int, min int64) plan.Bucket {
		b.Rank, b.Limits.Min = rank, min
		return b
	}
	tests := []struct {
		name    string
		buckets []plan.Bucket
		facts   *policy.Facts
		want    []string
	}{
		{name: "input capacity is the lesser of max and context",
			buckets: []plan.Bucket{
				plain("ctx-small", i64(100000), i64(8192), some, rr), // capacity 8192
				plain("max-small", i64(4096), i64(100000), some, rr), // capacity 4096
			},
			facts: facts(1000), want: []string{"max-small", "ctx-small"}},
		{name: "unbounded sorts last",
			buckets: []plan.Bucket{
				plain("open", nil, nil, some, rr),
				plain("huge", i64(math.MaxInt64-1), nil, some, rr),
				plain("small", i64(10), nil, some, rr),
			},
			facts: facts(5), want: []string{"small", "huge", "open"}},
		{name: "capacity ties by rank then id",
			buckets: []plan.Bucket{
				withRankMin(plain("z", i64(4096), nil, some, rr), 1, 0),
				withRankMin(plain("b", nil, i64(4096), some, rr), 2, 0),
				withRankMin(plain("a", i64(4096), i64(4096), some, rr), 2, 0),
			},
			facts: facts(1), want: []string{"z", "a", "b"}},
		{name: "input range is inclusive at both ends",
			buckets: []plan.Bucket{
				withRankMin(plain("100-200", i64(200), nil, some, rr), 0, 100),
				withRankMin(plain("201-300", i64(300), nil, some, rr), 0, 201),
				withRankMin(plain("0-99", i64(99), nil, some, rr), 0, 0),
			},
			facts: facts(200), want: []string{"100-200"}},
		{name: "lower bound is inclusive",
			buckets: []plan.Bucket{withRankMin(plain("100-200", i64(200), nil, some, rr), 0, 100)},
			facts:   facts(100), want: []string{"100-200"}},
		{name: "unknown output budget checks context against input only",
			buckets: []plan.Bucket{plain("ctx", nil, i64(4096), some, rr)},
			facts:   facts(4096), want: []string{"ctx"}},
		{name: "known peak must fit the context capacity",
			buckets: []plan.Bucket{plain("ctx", nil, i64(4096), some, rr), plain("big", nil, i64(8192), some, rr)},
			facts:   withPeak(4000, 4097), want: []string{"big"}},
		{name: "peak equal to context capacity fits",
			buckets: []plan.Bucket{plain("ctx", nil, i64(4096), some, rr)},
			facts:   withPeak(4000, 4096), want: []string{"ctx"}},
		{name: "no compatible bucket is an empty list",
			buckets: []plan.Bucket{plain("small", i64(10), nil, some, rr)},
			facts:   facts(11), want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.resolver(tt.buckets...).Resolve(tt.facts.InputTokens, tt.facts.ExpectedPeak, tt.facts.PeakKnown)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(bucketIDs(res.Buckets)); got != fmt.Sprint(tt.want) {
				t.Fatalf("Resolve = %s, want %v", got, tt.want)
			}
			if len(res.Buckets)+len(res.Excluded) != len(tt.buckets) {
				t.Fatalf("%d resolved + %d excluded, want all %d buckets accounted for", len(res.Buckets), len(res.Excluded), len(tt.buckets))
			}
			for _, x := range res.Excluded {
				if x.Reason == "" {
					t.Errorf("bucket %s excluded without a reason", x.Bucket.ID())
				}
			}
		})
	}
}

// TestResolveSpecExample is the example of docs/design.md, Buckets: a 4k input with a 16k
// expected peak cannot fit the short bucket's 8k context; with a peak of 8k or less both
// are compatible and the short one comes first.
func TestResolveSpecExample(t *testing.T) {
	e := newEnv(t, eng("P1", plan.RolePrefill), eng("D1", plan.RoleDecode))
	short := pd("short-context", i64(4096), i64(8192), []string{"P1"}, []string{"D1"}, rr)
	short.Rank = 10
	long := pd("long-context", i64(131072), i64(131072), []string{"P1"}, []string{"D1"}, rr)
	long.Rank = 20
	r := e.resolver(long, short)
	for _, tt := range []struct {
		peak int64
		want string
	}{{16384, "[long-context]"}, {8192, "[short-context long-context]"}, {4096, "[short-context long-context]"}} {
		res, err := r.Resolve(4096, tt.peak, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(bucketIDs(res.Buckets)); got != tt.want {
			t.Errorf("peak %d: Resolve = %s, want %s", tt.peak, got, tt.want)
		}
	}
	res, _ := r.Resolve(4096, 16384, true)
	if len(res.Excluded) != 1 || res.Excluded[0].Reason != "expected peak 16384 tokens (input plus requested output) exceeds max_context_tokens 8192" {
		t.Errorf("exclusions = %+v", res.Excluded)
	}
}

func TestResolveInvalidSignal(t *testing.T) {
	r := newEnv(t, eng("A", plan.RolePlain)).resolver(plain("any", nil, nil, nil, rr))
	for _, tt := range []struct {
		name        string
		input, peak int64
		known       bool
	}{
		{name: "peak below input", input: 100, peak: 99, known: true},
		{name: "negative input", input: -1},
	} {
		_, err := r.Resolve(tt.input, tt.peak, tt.known)
		var sig *policy.InvalidSignal
		if !errors.As(err, &sig) {
			t.Errorf("%s: err = %v, want InvalidSignal", tt.name, err)
		}
	}
	if _, err := r.Resolve(100, 100, true); err != nil {
		t.Errorf("peak equal to input: %v", err)
	}
}

func TestExpectedPeak(t *testing.T) {
	tests := []struct {
		input, max int64
		want       int64
		wantCode   Reason
	}{
		{input: 4096, max: 12288, want: 16384},
		{input: math.MaxInt64 - 5, max: 5, want: math.MaxInt64},
		{input: math.MaxInt64 - 5, max: 6, wantCode: TokenCountOverflow},
		{input: 1, max: -1, wantCode: InvalidTokenCount},
	}
	for _, tt := range tests {
		got, err := ExpectedPeak(tt.input, tt.max)
		if tt.wantCode == "" {
			if err != nil || got != tt.want {
				t.Errorf("ExpectedPeak(%d, %d) = %d, %v; want %d", tt.input, tt.max, got, err, tt.want)
			}
			continue
		}
		var re *Error
		if !errors.As(err, &re) || re.Reason != tt.wantCode || re.Code() != string(tt.wantCode) {
			t.Errorf("ExpectedPeak(%d, %d) err = %v, want %s", tt.input, tt.max, err, tt.wantCode)
		}
	}
}
