// Package selection holds what selects engines for one model of a plan: its bucket
// resolver, built over the plan's engines and the policies' shared state, and its
// tokenizer. `router serve` builds one per model for every plan it serves, and
// `router explain` builds the same for the model it explains, so an explanation runs the
// selection serving runs, built the same way.
package selection

import (
	"fmt"

	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/token"
	"github.com/routerkit/router/runtime/token/hf"
)

// Model is one model's selection stack.
type Model struct {
	Plan     *plan.Model
	Resolver *bucket.Resolver
	Tok      token.Tokenizer
	// TokName names Tok in explanations: the tokenizer file, or the stand-in.
	TokName string
}

// NewModel builds the stack of model m over the engines in reg and the policies' shared
// state deps.
func NewModel(m *plan.Model, reg *engine.Registry, deps policy.Deps) (*Model, error) {
	r, err := bucket.NewResolver(*m, reg, deps)
	if err != nil {
		return nil, fmt.Errorf("building buckets of model %s: %w", m.Name, err)
	}
	tok, err := hf.ForModel(m)
	if err != nil {
		return nil, fmt.Errorf("loading the tokenizer of model %s: %w", m.Name, err)
	}
	return &Model{Plan: m, Resolver: r, Tok: tok, TokName: hf.Describe(m)}, nil
}
