package explain

import (
	"fmt"
	"io"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
)

// Breaker is an engine of the model whose circuit breaker is not closed: open, it is
// left out of every candidate set like an unhealthy engine; half-open, it may get one
// probe request.
type Breaker struct {
	Engine string `json:"engine"`
	State  string `json:"state"`
}

// breakers lists the model's engines with a breaker that is not closed.
func breakers(reg *engine.Registry, model string) []Breaker {
	var out []Breaker
	snap := reg.Snapshot()
	for _, role := range []plan.Role{plan.RolePlain, plan.RolePrefill, plan.RoleDecode} {
		for _, w := range snap.Workers(model, role) {
			if b := w.Breaker(); b != nil && b.State() != engine.BreakerClosed {
				out = append(out, Breaker{Engine: w.ID(), State: b.State().String()})
			}
		}
	}
	return out
}

func writeBreakers(w io.Writer, bs []Breaker) {
	for _, b := range bs {
		fmt.Fprintf(w, "engine %s: circuit breaker %s\n", b.Engine, b.State)
	}
}
