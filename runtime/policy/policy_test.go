package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

func TestNew(t *testing.T) {
	tests := []struct {
		typ     plan.PolicyType
		want    Policy
		wantErr string
	}{
		{typ: plan.RoundRobin, want: &RoundRobin{}},
		{typ: plan.Random, want: &Random{}},
		{typ: plan.PowerOfTwo, want: &PowerOfTwo{}},
		{typ: plan.LoadBased, want: &LeastLoad{}},
		{typ: plan.SessionAware, wantErr: "policy session_aware is not implemented yet"},
		{typ: plan.Sticky, wantErr: "policy sticky is not implemented yet"},
		{typ: plan.CacheAware, wantErr: "policy cache_aware is not implemented yet"},
		{typ: "fused_score", wantErr: `unknown policy type "fused_score"`},
	}
	for _, tt := range tests {
		t.Run(string(tt.typ), func(t *testing.T) {
			p, err := New(plan.Policy{Type: tt.typ, Admission: plan.Admission{MaxInflightRequests: 3}}, Deps{})
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
