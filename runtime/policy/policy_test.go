package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity"
)

func TestNew(t *testing.T) {
	remote := plan.PrefixSource{Type: "remote_indexer", Endpoint: "http://10.0.0.1:9"}
	withRemote, err := NewDeps(&plan.Plan{Models: []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "b",
		Groups: plan.Groups{Plain: &plan.Group{Policy: plan.Policy{Type: plan.CacheAware, PrefixSource: &remote}}}}}}}},
		nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		policy  plan.Policy
		deps    Deps
		want    Policy
		wantErr string
	}{
		{name: "round_robin", policy: plan.Policy{Type: plan.RoundRobin}, want: &RoundRobin{}},
		{name: "random", policy: plan.Policy{Type: plan.Random}, want: &Random{}},
		{name: "power_of_two", policy: plan.Policy{Type: plan.PowerOfTwo}, want: &PowerOfTwo{}},
		{name: "load_based", policy: plan.Policy{Type: plan.LoadBased}, want: &LeastLoad{}},
		{name: "session_aware", policy: plan.Policy{Type: plan.SessionAware}, want: &SessionAware{}},
		{name: "session_aware with shared stores", policy: plan.Policy{Type: plan.SessionAware}, deps: withRemote, want: &SessionAware{}},
		{name: "session_aware of a model the stores lack", policy: plan.Policy{Type: plan.SessionAware},
			deps: Deps{Affinity: affinity.FromPlan(&plan.Plan{}, nil)}, wantErr: `no affinity store for model "m"`},
		{name: "sticky", policy: plan.Policy{Type: plan.Sticky, Fallback: plan.LoadBased}, want: &Sticky{}},
		{name: "sticky with a bad fallback", policy: plan.Policy{Type: plan.Sticky, Fallback: plan.Sticky}, wantErr: `sticky fallback "sticky"`},
		{name: "cache_aware", policy: plan.Policy{Type: plan.CacheAware}, want: &CacheAware{}},
		{name: "cache_aware remote", policy: plan.Policy{Type: plan.CacheAware, PrefixSource: &remote}, deps: withRemote, want: &CacheAware{}},
		{name: "cache_aware remote without its client", policy: plan.Policy{Type: plan.CacheAware, PrefixSource: &remote},
			wantErr: "no client for the remote prefix indexer http://10.0.0.1:9"},
		{name: "unknown", policy: plan.Policy{Type: "fused_score"}, wantErr: `unknown policy type "fused_score"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.policy.Admission = plan.Admission{MaxInflightRequests: 3}
			p, err := New("m", tt.policy, tt.deps)
			if tt.wantErr != "" {
				var ic *InvalidConfiguration
				if !errors.As(err, &ic) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want InvalidConfiguration containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprintf("%T", p), fmt.Sprintf("%T", tt.want); got != want {
				t.Fatalf("New built %s, want %s", got, want)
			}
			// The attachment's admission caps come with the policy.
			f := newFleet(t, plan.RolePlain, "A")
			f.inflight("A", 3)
			var rej *AdmissionRejected
			var none *NoAdmissibleEngine
			if _, err := p.Pick(context.Background(), f.workers, request(plan.RolePlain)); !errors.As(err, &rej) && !errors.As(err, &none) {
				t.Fatalf("Pick with in-flight at the configured cap = %v, want a rejection", err)
			}
		})
	}
}

func TestNewDepsRejectsGRPCIndexer(t *testing.T) {
	src := &plan.PrefixSource{Type: "remote_indexer", Endpoint: "grpc://10.0.0.1:50051"}
	_, err := NewDeps(&plan.Plan{Models: []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "b",
		Groups: plan.Groups{Plain: &plan.Group{Policy: plan.Policy{Type: plan.CacheAware, PrefixSource: src}}}}}}}}, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "not grpc://") {
		t.Fatalf("err = %v, want the grpc endpoint rejected", err)
	}
}
