package compiler

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue"

	"github.com/routerkit/router/runtime/plan"
)

// checkPDPairs reports a prefill/decode bucket in which a prefill engine cannot hand its
// KV cache to any of the bucket's decode engines (plan.PDMismatch over their pd_compat):
// selection would pick it, find no decode engine for it and fall through to the next
// bucket on every such request. A bucket where no pair at all can form is said so.
// Discovered engines count by their source's template.
func (c *checker) checkPDPairs(m *plan.Model, b *plan.Bucket, at []cue.Selector) {
	prefills := c.members(m.Name, plan.RolePrefill, b.Groups.PD.Prefill.WorkerIDs)
	decodes := c.members(m.Name, plan.RoleDecode, b.Groups.PD.Decode.WorkerIDs)
	if len(prefills) == 0 || len(decodes) == 0 {
		return // an empty group pairs nothing by configuration, not by compatibility
	}
	var lone, why []string
	for _, p := range prefills {
		reason := ""
		for _, d := range decodes {
			if reason = plan.PDMismatch(p.PDCompat, d.PDCompat); reason == "" {
				break
			}
		}
		if reason != "" {
			lone = append(lone, p.ID)
			why = append(why, fmt.Sprintf("%s and %s: %s", p.ID, decodes[len(decodes)-1].ID, reason))
		}
	}
	switch {
	case len(lone) == len(prefills):
		c.at(at, "bucket %q can never pair a prefill engine with a decode engine: no prefill engine's KV cache can go to any of its decode engines (%s); make the engines' pd_compat agree, or put compatible engines in the bucket's groups",
			b.ID, strings.Join(why, "; "))
	case len(lone) > 0:
		c.at(at, "bucket %q has prefill engines no decode engine of the bucket can receive KV from: %s (%s); every request given to them would fall through to the next bucket: make their pd_compat agree with a decode engine's, or move them to a bucket that has one",
			b.ID, strings.Join(lone, ", "), strings.Join(why, "; "))
	}
}

// members returns the engines a group of role in model holds: the ones worker_ids names,
// or, when it is nil, every engine of the model and role, discovered ones by their
// source's template.
func (c *checker) members(model string, role plan.Role, ids []string) []plan.Engine {
	var out []plan.Engine
	if ids == nil {
		for _, e := range c.fleet() {
			if e.Model == model && e.Role == role {
				out = append(out, e)
			}
		}
		return out
	}
	for _, id := range ids {
		if e, ok := c.engines[id]; ok && e.Model == model && e.Role == role {
			out = append(out, *e)
		}
	}
	return out
}
