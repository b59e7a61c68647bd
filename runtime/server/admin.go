package server

import (
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/discovery"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/slo"
	"github.com/routerkit/router/runtime/state/affinity"
	"github.com/routerkit/router/runtime/state/load"
)

// State is the snapshot GET /admin/state returns and `router top` renders.
type State struct {
	Time     time.Time `json:"time"`
	UptimeS  float64   `json:"uptime_s"`
	Draining bool      `json:"draining"`
	// Generation counts the plans this router has served: 1 at startup, one more per
	// reload or membership change.
	Generation uint64        `json:"generation"`
	Engines    []EngineState `json:"engines"`
	Buckets    []BucketState `json:"buckets"`
	Decisions  []Decision    `json:"decisions"`
	// Bindings is where session and sticky bindings live and whether that store is up.
	Bindings affinity.Status `json:"bindings"`
	// DNS is each engines_from_dns source: what its last lookup found or why it failed.
	DNS []discovery.Status `json:"dns,omitempty"`
}

// EngineState is one engine as the router sees it.
type EngineState struct {
	ID    string    `json:"id"`
	URL   string    `json:"url"`
	Model string    `json:"model"`
	Role  plan.Role `json:"role"`
	// State is serving, draining (no new picks; still a member) or leaving (removed,
	// finishing its requests before it is forgotten).
	State string `json:"state"`
	// Origin is where the engine came from: config, admin or dns.
	Origin  string   `json:"origin"`
	Groups  []string `json:"groups"`
	Healthy bool     `json:"healthy"`
	// Breaker is the circuit breaker's state: closed, open or half_open.
	Breaker  string       `json:"breaker"`
	Inflight int64        `json:"inflight"`
	Load     *load.Sample `json:"load"`
	// ReportAgeMS is the age of the usable load report, -1 when there is none.
	ReportAgeMS float64 `json:"report_age_ms"`
	Picks       float64 `json:"picks"`
	Rejections  float64 `json:"admission_rejections"`
	HealthError string  `json:"health_error,omitempty"`
	LoadError   string  `json:"load_error,omitempty"`
	// PrefixIndex is the engine's size in each of the router's prefix indexes.
	PrefixIndex []PrefixIndexSize `json:"prefix_index,omitempty"`
}

// BucketState is one bucket's counters, and its SLO estimates.
type BucketState struct {
	Model        string             `json:"model"`
	ID           string             `json:"id"`
	Requests     float64            `json:"requests"`
	Fallthroughs float64            `json:"fallthroughs"`
	ByStatus     map[string]float64 `json:"by_status"`
	// TTFTEstimate and TPSEstimate are the estimates SLO ordering compares targets with
	// now, configured or learned; absent when the bucket has no estimates.
	TTFTEstimate *slo.Estimate `json:"ttft_estimate,omitempty"`
	TPSEstimate  *slo.Estimate `json:"tps_estimate,omitempty"`
	// SLOMet and SLOMissed count, by target (ttft, tps), the selections of the bucket
	// whose estimate met or missed the request's target.
	SLOMet    map[string]float64 `json:"slo_met,omitempty"`
	SLOMissed map[string]float64 `json:"slo_missed,omitempty"`
}

func (s *generation) state(w http.ResponseWriter, _ *http.Request) {
	fams, err := s.metrics.reg.Gather()
	if err != nil {
		answer.Write(w, http.StatusInternalServerError, answer.CodeInternal, "gathering metrics: "+err.Error())
		return
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	now := time.Now()
	st := State{Time: now, UptimeS: now.Sub(s.started).Seconds(), Draining: s.draining.Load(), Decisions: s.recent.list(),
		Bindings: s.deps.Affinity.Status(), Generation: s.number, DNS: s.dnsStatus()}
	status := s.monitor.Status()
	groups := s.engineGroups()
	picks := sumBy(byName["router_picks_total"], "engine")
	rejections := sumBy(byName["router_admission_rejections_total"], "engine")
	for _, mb := range s.memberList() {
		e, wk := mb.engine, mb.worker
		es := EngineState{
			ID: e.ID, URL: plan.RedactURL(e.URL), Model: e.Model, Role: e.Role, Groups: groups[e.ID], State: mb.state(), Origin: mb.origin,
			Healthy: wk.Healthy(), Breaker: breakerState(wk), Inflight: wk.Inflight(), ReportAgeMS: -1,
			Picks: picks[e.ID], Rejections: rejections[e.ID],
			HealthError: status[e.ID].HealthError, LoadError: status[e.ID].LoadError,
			PrefixIndex: s.prefixSizes(e),
		}
		if r := s.table.LoadAt(wk, s.table.Now()); r != nil {
			sample := r.Sample
			es.Load, es.ReportAgeMS = &sample, float64(time.Since(r.At).Microseconds())/1000
		}
		st.Engines = append(st.Engines, es)
	}
	requests := sumBy(byName["router_requests_total"], "model", "bucket")
	fallthroughs := sumBy(byName["router_bucket_fallthroughs_total"], "model", "bucket")
	byStatus := sumBy(byName["router_requests_total"], "model", "bucket", "status")
	sloCounts := sumBy(byName["router_slo_selections_total"], "model", "bucket", "outcome", "target")
	for _, m := range s.plan.Models {
		estimates := map[string]*slo.Estimates{}
		if sm := s.models.Get(m.Name); sm != nil {
			for _, b := range sm.Resolver.Buckets() {
				estimates[b.ID()] = b.Estimates()
			}
		}
		for _, b := range m.Buckets {
			bs := BucketState{Model: m.Name, ID: b.ID, Requests: requests[m.Name+"\x00"+b.ID],
				Fallthroughs: fallthroughs[m.Name+"\x00"+b.ID], ByStatus: map[string]float64{}}
			prefix := m.Name + "\x00" + b.ID + "\x00"
			for k, v := range byStatus {
				if code, ok := strings.CutPrefix(k, prefix); ok {
					bs.ByStatus[code] = v
				}
			}
			if e := estimates[b.ID]; e != nil {
				ttft, tps := e.TTFT(), e.TPS()
				bs.TTFTEstimate, bs.TPSEstimate = &ttft, &tps
			}
			bs.SLOMet, bs.SLOMissed = outcomes(sloCounts, prefix+bucket.SLOMet+"\x00"), outcomes(sloCounts, prefix+bucket.SLOMissed+"\x00")
			st.Buckets = append(st.Buckets, bs)
		}
	}
	answer.JSON(w, http.StatusOK, st)
}

// engineGroups names, per engine, the groups that may pick it as "bucket/stage". A group
// without worker_ids takes every engine of its model and role.
func (s *generation) engineGroups() map[string][]string {
	out := map[string][]string{}
	add := func(model string, b plan.Bucket, g *plan.Group, role plan.Role) {
		for _, e := range s.plan.Engines {
			if e.Model == model && e.Role == role && (g.WorkerIDs == nil || slices.Contains(g.WorkerIDs, e.ID)) {
				out[e.ID] = append(out[e.ID], b.ID+"/"+string(role))
			}
		}
	}
	for _, m := range s.plan.Models {
		for _, b := range m.Buckets {
			if b.Groups.Plain != nil {
				add(m.Name, b, b.Groups.Plain, plan.RolePlain)
			} else {
				add(m.Name, b, &b.Groups.PD.Prefill, plan.RolePrefill)
				add(m.Name, b, &b.Groups.PD.Decode, plan.RoleDecode)
			}
		}
	}
	return out
}

// sumBy sums a counter family's series grouped by the values of labels, joined by NUL.
// outcomes are the SLO selection counts under prefix (model, bucket, outcome), by target;
// nil when there are none.
func outcomes(counts map[string]float64, prefix string) map[string]float64 {
	var out map[string]float64
	for k, v := range counts {
		if target, ok := strings.CutPrefix(k, prefix); ok {
			if out == nil {
				out = map[string]float64{}
			}
			out[target] = v
		}
	}
	return out
}

func sumBy(f *dto.MetricFamily, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		key := make([]string, len(labels))
		for i, name := range labels {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == name {
					key[i] = lp.GetValue()
				}
			}
		}
		out[strings.Join(key, "\x00")] += m.GetCounter().GetValue()
	}
	return out
}
