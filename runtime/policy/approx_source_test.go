package policy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

func approxPlan(src plan.PrefixSource) *plan.Plan {
	g := plan.Group{Policy: plan.Policy{Type: plan.CacheAware, PrefixSource: &src}}
	return &plan.Plan{
		Engines: []plan.Engine{
			{ID: "P1", Model: "m", Role: plan.RolePrefill}, {ID: "P2", Model: "m", Role: plan.RolePrefill},
			{ID: "D1", Model: "m", Role: plan.RoleDecode},
		},
		Models: []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "b", Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: g, Decode: plan.Group{Policy: plan.Policy{Type: plan.PowerOfTwo}}}}}}}},
	}
}

func ids(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i * 7)
	}
	return out
}

// TestApproximateSourceLearnsFromDispatches: a recorded dispatch makes its prefill engine
// the holder of the prompt's whole blocks, in tokens; decode engines are not indexed.
func TestApproximateSourceLearnsFromDispatches(t *testing.T) {
	src := plan.PrefixSource{Type: "approximate", CapacityTokens: 10_000, TTLSecs: 60, BlockSize: 16}
	now := time.Unix(1_700_000_000, 0)
	deps, err := NewDeps(approxPlan(src), nil, nil, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	pol, err := New("m", approxPlan(src).Models[0].Buckets[0].Groups.PD.Prefill.Policy, deps)
	if err != nil {
		t.Fatal(err)
	}
	source := pol.(*CacheAware).source
	if source.Name() != "approximate" {
		t.Fatalf("source %q", source.Name())
	}
	prompt := ids(100) // 6 whole blocks and 4 tokens
	deps.RecordDispatch("P2", NewBlockHashes(prompt))
	deps.RecordDispatch("D1", NewBlockHashes(prompt))
	deps.RecordDispatch("P1", NewBlockHashes(prompt[:10])) // shorter than a block: nothing to learn
	res, err := source.Lookup(context.Background(), "m", prompt)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matched) != 1 || res.Matched["P2"] != 96 {
		t.Fatalf("Matched = %v, want P2 with 96 tokens", res.Matched)
	}
	if res, _ := source.Lookup(context.Background(), "m", prompt[:15]); len(res.Matched) != 0 {
		t.Fatalf("a prompt shorter than a block matched %v", res.Matched)
	}
	now = now.Add(61 * time.Second)
	if res, _ := source.Lookup(context.Background(), "m", prompt); len(res.Matched) != 0 {
		t.Fatalf("expired entries matched %v", res.Matched)
	}
}

func TestApproximateSourceNeedsItsIndex(t *testing.T) {
	src := plan.PrefixSource{Type: "approximate", CapacityTokens: 10_000, BlockSize: 16}
	_, err := New("m", plan.Policy{Type: plan.CacheAware, PrefixSource: &src}, Deps{})
	var ic *InvalidConfiguration
	if !errors.As(err, &ic) {
		t.Fatalf("New without the index: %v, want InvalidConfiguration", err)
	}
}
