package server

import (
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
)

// zeroSeries creates, at zero, the series the configuration can produce, so that every
// documented metric is on /metrics from the start: a dashboard or an alert on rate() then
// sees 0 rather than no data, and a typo in a query shows at once. Label values come from
// the plan and the code's fixed sets, as for the counters themselves, so this adds no
// series that traffic could not add.
func (m *metrics) zeroSeries(p *plan.Plan) {
	for _, model := range p.Models {
		m.duration.WithLabelValues(model.Name)
		m.ttft.WithLabelValues(model.Name)
		m.retries.WithLabelValues(model.Name)
		m.requests.WithLabelValues(model.Name, "none", "503")
		for _, b := range model.Buckets {
			m.requests.WithLabelValues(model.Name, b.ID, "200")
			m.fallthroughs.WithLabelValues(model.Name, b.ID)
			for _, code := range []string{"engine_error", "prefill_error"} {
				if code == "prefill_error" && b.Groups.PD == nil {
					continue
				}
				m.streamFails.WithLabelValues(model.Name, b.ID, code)
			}
			for _, t := range [...]struct{ target, pref string }{{bucket.TargetTTFT, model.SLO.TTFT}, {bucket.TargetTPS, model.SLO.TPS}} {
				if t.pref == plan.SLOFirst || t.pref == plan.SLOBestEffort {
					m.sloSelections.WithLabelValues(model.Name, b.ID, t.target, bucket.SLOMet)
					m.sloSelections.WithLabelValues(model.Name, b.ID, t.target, bucket.SLOMissed)
				}
			}
			for stage, g := range bucketGroups(b) {
				for _, id := range members(p, model.Name, stage, g) {
					m.picks.WithLabelValues(model.Name, b.ID, string(stage), string(g.Policy.Type), id)
					for _, limit := range caps(g.Policy.Admission) {
						m.rejections.WithLabelValues(id, limit)
					}
				}
			}
		}
	}
	for _, stage := range []plan.Role{plan.RolePlain, plan.RolePrefill, plan.RoleDecode} {
		for _, phase := range []string{dispatch.PhaseConnect, dispatch.PhaseFirstByte, dispatch.PhaseStreamIdle, dispatch.PhaseTotal} {
			m.timeouts.WithLabelValues(string(stage), phase)
		}
	}
	m.timeouts.WithLabelValues(string(plan.RoleDecode), dispatch.PhasePrefillStatus)
	m.timeouts.WithLabelValues("client", dispatch.PhaseBodyRead)
}

// bucketGroups is a bucket's groups by stage.
func bucketGroups(b plan.Bucket) map[plan.Role]plan.Group {
	if b.Groups.PD != nil {
		return map[plan.Role]plan.Group{plan.RolePrefill: b.Groups.PD.Prefill, plan.RoleDecode: b.Groups.PD.Decode}
	}
	if b.Groups.Plain != nil {
		return map[plan.Role]plan.Group{plan.RolePlain: *b.Groups.Plain}
	}
	return nil
}

// members are the engine ids a group may pick: its worker_ids, or every engine of the
// model with the group's role.
func members(p *plan.Plan, model string, role plan.Role, g plan.Group) []string {
	if g.WorkerIDs != nil {
		return g.WorkerIDs
	}
	var ids []string
	for _, e := range p.Engines {
		if e.Model == model && e.Role == role {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// caps are the configuration names of the admission caps a group sets.
func caps(a plan.Admission) []string {
	var out []string
	for _, c := range []struct {
		name string
		set  bool
	}{
		{policy.LimitRunning, a.MaxRunningRequests > 0}, {policy.LimitWaiting, a.MaxWaitingRequests > 0},
		{policy.LimitKVTokens, a.MaxKVTokens > 0}, {policy.LimitPendingPrefill, a.MaxPendingPrefillTokens > 0},
		{policy.LimitInflight, a.MaxInflightRequests > 0},
	} {
		if c.set {
			out = append(out, c.name)
		}
	}
	return out
}
