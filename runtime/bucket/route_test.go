package bucket

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
)

// twoPDBuckets is a small and a large PD bucket with disjoint engines.
func twoPDBuckets(t *testing.T, p plan.Policy) (*env, *Resolver) {
	e := newEnv(t, eng("P1", plan.RolePrefill), eng("P2", plan.RolePrefill), eng("D1", plan.RoleDecode), eng("D2", plan.RoleDecode))
	r := e.resolver(
		pd("small", i64(4096), nil, []string{"P1"}, []string{"D1"}, p),
		pd("large", nil, nil, []string{"P2"}, []string{"D2"}, p),
	)
	return e, r
}

func TestRoutePDAdvancesOnDecodeFailureWithoutMixing(t *testing.T) {
	e, r := twoPDBuckets(t, rr)
	e.w("D1").SetHealthy(false) // small bucket: prefill succeeds, decode has no candidates
	pass, tr := traced()
	sel, err := r.Route(context.Background(), facts(100), pass)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Bucket.ID() != "large" || sel.Prefill.Engine != e.w("P2") || sel.Decode.Engine != e.w("D2") {
		t.Fatalf("selection = bucket %s, P %v, D %v; want large with P2 and D2",
			sel.Bucket.ID(), sel.Prefill.Engine.ID(), sel.Decode.Engine.ID())
	}
	if len(tr.Attempts) != 2 || len(tr.Attempts[0].Groups) != 2 || tr.Attempts[0].Groups[0].Pick != "P1" {
		t.Fatalf("trace attempts = %+v, want a small attempt whose prefill picked P1, then large", tr.Attempts)
	}
}

func TestRoutePlainSelection(t *testing.T) {
	e := newEnv(t, eng("A", plan.RolePlain))
	sel, err := e.resolver(plain("b", nil, nil, nil, rr)).Route(context.Background(), facts(1), nil)
	if err != nil || sel.Plain.Engine != e.w("A") || sel.Prefill.Engine != nil || sel.Decode.Engine != nil {
		t.Fatalf("Route = %+v, %v; want plain A only", sel, err)
	}
}

func TestRouteFailures(t *testing.T) {
	capped := plan.Policy{Type: plan.RoundRobin, Admission: plan.Admission{MaxInflightRequests: 1}}
	tests := []struct {
		name        string
		policy      plan.Policy
		setup       func(e *env, r *Resolver)
		facts       *policy.Facts
		wantReason  Reason
		wantCode    string
		wantReasons int
		wantTried   int // bucket attempts
	}{
		{name: "no bucket fits the length", policy: rr, facts: withPeak(5000, 5000),
			setup:      func(e *env, r *Resolver) { r.buckets = r.buckets[:1] },
			wantReason: NoMatchingBucket, wantCode: "no_matching_bucket"},
		{name: "peak below input stops with an internal error", policy: rr, facts: withPeak(10, 5),
			wantReason: InvalidSignal, wantCode: "invalid_signal"},
		{name: "admission rejections accumulate across buckets", policy: capped, facts: facts(1),
			setup: func(e *env, _ *Resolver) {
				e.w("P1").AddInflight(1)
				e.w("D2").AddInflight(1)
			},
			wantReason: AdmissionRejected, wantCode: "admission_rejected", wantReasons: 2, wantTried: 2},
		{name: "rejection reasons win over a later missing stage", policy: capped, facts: facts(1),
			setup: func(e *env, _ *Resolver) {
				e.w("P1").AddInflight(1)
				e.w("D2").SetHealthy(false)
			},
			wantReason: AdmissionRejected, wantCode: "admission_rejected", wantReasons: 1, wantTried: 2},
		{name: "no candidates names the last unavailable stage", policy: rr, facts: facts(1),
			setup: func(e *env, _ *Resolver) {
				e.w("P1").SetHealthy(false)
				e.w("D2").SetHealthy(false)
			},
			wantReason: NoCandidates, wantCode: "no_decode_engine", wantTried: 2},
		{name: "a foreign pick stops routing", policy: rr, facts: facts(1),
			setup: func(e *env, r *Resolver) {
				r.buckets[0].decode.policy = policyFunc(func(context.Context, []*engine.Worker, *policy.Request) (policy.Pick, error) {
					return policy.Pick{Engine: e.w("D2")}, nil // a real engine, but another bucket's
				})
			},
			wantReason: OutsideCandidates, wantCode: "outside_candidates", wantTried: 1},
		{name: "an invalid configuration stops routing", policy: rr, facts: facts(1),
			setup: func(_ *env, r *Resolver) {
				r.buckets[0].prefill.policy = policyFunc(func(context.Context, []*engine.Worker, *policy.Request) (policy.Pick, error) {
					return policy.Pick{}, &policy.InvalidConfiguration{Msg: "broken"}
				})
			},
			wantReason: InvalidConfiguration, wantCode: "invalid_configuration", wantTried: 1},
		{name: "an invalid policy signal stops routing", policy: rr, facts: facts(1),
			setup: func(_ *env, r *Resolver) {
				r.buckets[0].prefill.policy = policyFunc(func(context.Context, []*engine.Worker, *policy.Request) (policy.Pick, error) {
					return policy.Pick{}, &policy.InvalidSignal{Msg: "bad"}
				})
			},
			wantReason: InvalidSignal, wantCode: "invalid_signal", wantTried: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, r := twoPDBuckets(t, tt.policy)
			if tt.setup != nil {
				tt.setup(e, r)
			}
			pass, tr := traced()
			_, err := r.Route(context.Background(), tt.facts, pass)
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if re.Reason != tt.wantReason || re.Code() != tt.wantCode || len(re.Reasons) != tt.wantReasons {
				t.Fatalf("error = %s %s %q (%d reasons), want %s %s with %d reasons",
					re.Reason, re.Code(), re.Error(), len(re.Reasons), tt.wantReason, tt.wantCode, tt.wantReasons)
			}
			if len(tr.Attempts) != tt.wantTried {
				t.Fatalf("%d bucket attempts, want %d", len(tr.Attempts), tt.wantTried)
			}
		})
	}
}

func TestRouteRejectionReasonsNameBucketAndEngine(t *testing.T) {
	e, r := twoPDBuckets(t, plan.Policy{Type: plan.RoundRobin, Admission: plan.Admission{MaxInflightRequests: 1}})
	e.w("D1").AddInflight(1)
	e.w("P2").AddInflight(1)
	_, err := r.Route(context.Background(), facts(1), nil)
	var re *Error
	if !errors.As(err, &re) {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		"bucket small: no admissible decode engine: decode engine D1 rejected by admission: router in-flight requests is 1, cap 1",
		"bucket large: no admissible prefill engine: prefill engine P2 rejected by admission: router in-flight requests is 1, cap 1",
	}
	if fmt.Sprint(re.Reasons) != fmt.Sprint(want) {
		t.Fatalf("reasons =\n%s\nwant\n%s", strings.Join(re.Reasons, "\n"), strings.Join(want, "\n"))
	}
}

func TestRouteTrace(t *testing.T) {
	e, r := twoPDBuckets(t, rr)
	e.w("D1").SetHealthy(false)
	pass, tr := traced()
	if _, err := r.Route(context.Background(), withPeak(100, 5000), pass); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tr.Resolved) != "[small large]" || len(tr.Excluded) != 0 {
		t.Fatalf("resolved %v excluded %v", tr.Resolved, tr.Excluded)
	}
	small := tr.Attempts[0]
	if small.Bucket != "small" || !strings.Contains(small.Error, "no eligible decode engine") {
		t.Errorf("first attempt = %+v", small)
	}
	dec := small.Groups[1]
	if dec.Stage != plan.RoleDecode || len(dec.Candidates) != 0 || dec.Error == "" {
		t.Errorf("small decode group = %+v, want no candidates and an error", dec)
	}
	large := tr.Attempts[1]
	if large.Error != "" || large.Groups[0].Pick != "P2" || large.Groups[1].Pick != "D2" || large.Groups[1].Reason == "" {
		t.Errorf("second attempt = %+v", large)
	}
	if v := large.Groups[1].Admission; len(v) != 1 || !v[0].Admitted || v[0].Engine != "D2" {
		t.Errorf("large decode admission = %+v", v)
	}
}

func TestRouteMemoizesPrefixLookups(t *testing.T) {
	var queries atomic.Int64
	indexer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		queries.Add(1)
		w.Write([]byte(`{"matches": {"http://p1": 100}}`))
	}))
	defer indexer.Close()

	engines := []plan.Engine{
		{ID: "P1", URL: "http://p1", Model: model, Role: plan.RolePrefill, DPSize: 1},
		{ID: "P2", URL: "http://p2", Model: model, Role: plan.RolePrefill, DPSize: 1},
		{ID: "D1", URL: "http://d1", Model: model, Role: plan.RoleDecode, DPSize: 1},
	}
	cache := func(inflightCap int64) plan.Policy {
		return plan.Policy{Type: plan.CacheAware, Admission: plan.Admission{MaxInflightRequests: inflightCap},
			PrefixSource: &plan.PrefixSource{Type: "remote_indexer", Endpoint: indexer.URL}}
	}
	bucket := func(id string, maxInput *int64, prefill []string, p plan.Policy) plan.Bucket {
		return plan.Bucket{ID: id, Limits: plan.Limits{Max: maxInput}, Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: plan.Group{WorkerIDs: prefill, Policy: p}, Decode: plan.Group{Policy: rr}}}}
	}
	m := plan.Model{Name: model, Buckets: []plan.Bucket{
		bucket("small", i64(4096), []string{"P1"}, cache(1)),
		bucket("large", nil, []string{"P1", "P2"}, cache(2)),
	}}
	e := newEnv(t, engines...)
	deps, err := policy.NewDeps(&plan.Plan{Engines: engines, Models: []plan.Model{m}}, e.table, policy.NewSeededRand(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(m, e.reg, deps)
	if err != nil {
		t.Fatal(err)
	}
	e.w("P1").AddInflight(1) // at the small bucket's cap: that attempt fails after its lookup

	f := &policy.Facts{Model: model, InputTokens: 2048, TokenIDs: make([]uint32, 2048)}
	sel, err := r.Route(context.Background(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Bucket.ID() != "large" || sel.Prefill.Engine != e.w("P1") {
		t.Fatalf("selection = bucket %s, prefill %s; want large, P1 (the prefix holder)", sel.Bucket.ID(), sel.Prefill.Engine.ID())
	}
	if n := queries.Load(); n != 1 {
		t.Fatalf("%d indexer queries for one request over two buckets, want 1", n)
	}
	if _, err := r.Route(context.Background(), f, nil); err != nil {
		t.Fatal(err)
	}
	if n := queries.Load(); n != 2 {
		t.Fatalf("%d indexer queries after a second request, want 2: the memo is per request", n)
	}
}
