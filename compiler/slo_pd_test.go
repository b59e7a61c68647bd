package compiler

import (
	"errors"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// compileOne compiles one YAML config and returns its plan or its errors.
func compileOne(t *testing.T, src string) (*plan.Plan, Errors) {
	t.Helper()
	p, err := CompileSources([]Source{{Name: "c.yaml", Data: []byte(src)}})
	var errs Errors
	if err != nil && !errors.As(err, &errs) {
		t.Fatalf("want Errors, got %v", err)
	}
	return p, errs
}

const pdEngines = `
engines:
  - {id: P1, url: "http://127.0.0.1:1", model: m, role: prefill, pd_compat: {transfer_backend: mooncake, page_size: 64}}
  - {id: P2, url: "http://127.0.0.1:2", model: m, role: prefill, pd_compat: {transfer_backend: nixl}}
  - {id: D1, url: "http://127.0.0.1:3", model: m, role: decode, pd_compat: {transfer_backend: mooncake, page_size: 64, tp_size: 4}}
  - {id: D2, url: "http://127.0.0.1:4", model: m, role: decode, pd_compat: {group: other}}
models:
  m:
    buckets:
`

// A PD bucket is checked pair by pair: a bucket with no pair is refused at the bucket's
// groups, one with a prefill engine that has no partner too, and one where every prefill
// engine has a partner compiles; fields only one side declares are not compared.
func TestPDCompatibilityAtCompileTime(t *testing.T) {
	for _, tc := range []struct {
		name, bucket string
		want         string // "" compiles
		line         int
	}{
		{"never pair", `      - {id: b, groups: {pd: {prefill: {worker_ids: [P2]}, decode: {worker_ids: [D1]}}}}`,
			`bucket "b" can never pair a prefill engine with a decode engine: no prefill engine's KV cache can go to any of its decode engines (P2 and D1: transfer backend nixl is not mooncake)`, 10},
		{"lone prefill", `      - {id: b, groups: {pd: {prefill: {worker_ids: [P1, P2]}, decode: {worker_ids: [D1]}}}}`,
			`bucket "b" has prefill engines no decode engine of the bucket can receive KV from: P2 (P2 and D1: transfer backend nixl is not mooncake)`, 10},
		{"every prefill has a partner", `      - {id: b, groups: {pd: {prefill: {}, decode: {}}}}`, "", 0},
		{"group mismatch", `      - {id: b, groups: {pd: {prefill: {worker_ids: [P1]}, decode: {worker_ids: [D2]}}}}`, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, errs := compileOne(t, pdEngines+tc.bucket)
			if tc.want == "" {
				if errs != nil {
					t.Fatalf("want a plan, got %v", errs)
				}
				if c := p.Engines[0].PDCompat; c == nil || c.TransferBackend != "mooncake" || c.PageSize != 64 {
					t.Errorf("pd_compat of P1 compiled to %+v", c)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Msg, tc.want) || errs[0].Line != tc.line || errs[0].Col < 1 {
				t.Fatalf("want one error at line %d containing %q, got %v", tc.line, tc.want, errs)
			}
			if errs[0].Path != "models.m.buckets.0.groups.pd" {
				t.Errorf("error path %q, want the bucket's pd groups", errs[0].Path)
			}
		})
	}
}

// SLO settings compile to the plan with their defaults; a preference that no bucket has an
// estimate for and a learned estimate that needs more samples than it keeps are refused.
func TestSLOSettings(t *testing.T) {
	const head = `
engines: [{id: E1, url: "http://127.0.0.1:1", model: m, role: plain}]
models:
  m:
`
	p, errs := compileOne(t, head+`
    slo: {ttft: slo_first, tps: best_effort}
    buckets:
      - {id: fast, estimates: {ttft_ms: 80, learn: {}}, groups: {plain: {}}}
      - {id: slow, estimates: {tps: 12.5}, groups: {plain: {}}}
`)
	if errs != nil {
		t.Fatal(errs)
	}
	m := p.Models[0]
	if m.SLO != (plan.SLOPreferences{TTFT: plan.SLOFirst, TPS: plan.SLOBestEffort}) {
		t.Errorf("preferences: %+v", m.SLO)
	}
	fast, slow := m.Buckets[0].Estimates, m.Buckets[1].Estimates
	if *fast.TTFTMS != 80 || fast.TPS != nil || *fast.Learn != (plan.Learn{Samples: 256, HalfLifeSecs: 60, MinSamples: 20}) {
		t.Errorf("fast estimates: %+v %+v", fast, fast.Learn)
	}
	if slow.TTFTMS != nil || *slow.TPS != 12.5 || slow.Learn != nil {
		t.Errorf("slow estimates: %+v", slow)
	}

	p, errs = compileOne(t, head+`    buckets: [{id: a, groups: {plain: {}}}]`)
	if errs != nil || p.Models[0].SLO != (plan.SLOPreferences{TTFT: plan.SLODisabled, TPS: plan.SLODisabled}) || p.Models[0].Buckets[0].Estimates != nil {
		t.Errorf("defaults: %+v, %v", p, errs)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"no estimate", `
    slo: {tps: slo_first}
    buckets: [{id: a, estimates: {ttft_ms: 10}, groups: {plain: {}}}]`,
			`slo.tps is slo_first but no bucket of model "m" has an estimate to compare targets with`},
		{"min above samples", `
    buckets: [{id: a, estimates: {learn: {samples: 8, min_samples: 9}}, groups: {plain: {}}}]`,
			`min_samples (9) is more than samples (8)`},
		{"unknown preference", `
    slo: {ttft: always}
    buckets: [{id: a, groups: {plain: {}}}]`,
			`an SLO preference must be "disabled", "slo_first" or "best_effort"`},
		{"estimate not positive", `
    buckets: [{id: a, estimates: {ttft_ms: 0}, groups: {plain: {}}}]`,
			`invalid value 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := compileOne(t, head+tc.body)
			if len(errs) == 0 || !strings.Contains(errs.Error(), tc.want) || errs[0].Line < 1 {
				t.Fatalf("want a positioned error containing %q, got %v", tc.want, errs)
			}
		})
	}
}
