package control

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/routerkit/router/runtime/answer"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/discovery"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/queue"
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
	// Queue is the concurrency limit, the rate limit and the requests waiting per model.
	Queue *QueueState `json:"queue"`
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

// PrefixIndexSize is how much of an engine's KV cache one prefix index believes it knows
// about, as /admin/state reports it. A remote indexer keeps its index elsewhere, so it has
// no size here.
type PrefixIndexSize struct {
	// Source is "local_index" (fed by the engine's KV events), "speculative" (the local
	// index's guesses from dispatches, not yet confirmed by events or expired) or
	// "approximate" (learned from the router's dispatches).
	Source string `json:"source"`
	// Blocks is how many pages the index holds for the engine (summed over DP ranks for the
	// local index), and Tokens the same in tokens.
	Blocks int   `json:"blocks"`
	Tokens int64 `json:"tokens"`
	// CapacityTokens bounds an approximate index's share of the engine; 0 for the local
	// index, which holds what the engine reports.
	CapacityTokens int64 `json:"capacity_tokens,omitempty"`
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

// Decision is one request's routing outcome, as /admin/state lists it.
type Decision struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id,omitempty"`
	// TraceID is the request's trace (W3C, hex) when tracing is on.
	TraceID      string            `json:"trace_id,omitempty"`
	Model        string            `json:"model"`
	InputTokens  int64             `json:"input_tokens"`
	ExpectedPeak int64             `json:"expected_peak,omitempty"`
	Bucket       string            `json:"bucket,omitempty"`
	Engines      map[string]string `json:"engines,omitempty"`
	Reasons      map[string]string `json:"reasons,omitempty"`
	Fallthroughs int               `json:"fallthroughs,omitempty"`
	Retries      int               `json:"retries,omitempty"`
	// QueuedMS is how long the request waited in its model's queue.
	QueuedMS   float64 `json:"queued_ms,omitempty"`
	Status     int     `json:"status"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	// Generation is the plan the request ran on (see State.Generation).
	Generation uint64 `json:"generation,omitempty"`
}

// QueueState is the queue in /admin/state.
type QueueState struct {
	// Size and TimeoutMS are queue.size and queue.timeout_ms.
	Size      int `json:"size"`
	TimeoutMS int `json:"timeout_ms"`
	// Running is the requests holding a slot of MaxConcurrent.
	Running       int `json:"running"`
	MaxConcurrent int `json:"max_concurrent_requests"`
	// RateLimit is rate_limit's requests_per_second and burst, when set.
	RateLimit *plan.RateLimit `json:"rate_limit,omitempty"`
	// Waiting is the requests waiting per model.
	Waiting map[string]int `json:"waiting"`
}

// EngineStatus is a member engine with what only the state snapshot reads of it: its
// breaker, when its load report was taken, the monitor's last errors and its prefix
// index sizes. Member alone is cheap enough for every metrics scrape; these are not all.
type EngineStatus struct {
	Member
	// Breaker is closed, open or half_open.
	Breaker string
	// LoadAt is when Load was reported; zero without a load report.
	LoadAt      time.Time
	HealthError string
	LoadError   string
	PrefixIndex []PrefixIndexSize
}

// StateSource is what GET /admin/state reads of the router, raw: control adds the
// counters up, finds each engine's groups and writes the snapshot. The plan, models and
// queue are those of the generation whose routes are served; the rest is the router's.
type StateSource interface {
	Router
	// Started is when the router started.
	Started() time.Time
	// Draining is whether the router is shutting down.
	Draining() bool
	// Plan is the served generation's plan and its number.
	Plan() (*plan.Plan, uint64)
	// Registry gathers the router's metrics; the snapshot's counters are its sums.
	Registry() prometheus.Gatherer
	// EngineStatuses lists the member engines in fleet order, leaving ones included.
	EngineStatuses() []EngineStatus
	// Decisions are the recent routing decisions, newest first.
	Decisions() []Decision
	// Bindings reports the session and sticky binding store.
	Bindings() affinity.Status
	// DNS reports each DNS discovery source, nil without any.
	DNS() []discovery.Status
	// Queue is the served generation's queue.
	Queue() *queue.Queue
}

// StateHandler answers GET /admin/state with src's snapshot. Register it behind Guard.
func StateHandler(src StateSource) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		st, err := snapshotOf(src, time.Now())
		if err != nil {
			answer.Write(w, http.StatusInternalServerError, answer.CodeInternal, "gathering metrics: "+err.Error())
			return
		}
		answer.JSON(w, http.StatusOK, st)
	}
}

// snapshotOf assembles the state of src at now; the error is the metrics registry's.
func snapshotOf(src StateSource, now time.Time) (State, error) {
	fams, err := src.Registry().Gather()
	if err != nil {
		return State{}, err
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	p, number := src.Plan()
	st := State{Time: now, UptimeS: now.Sub(src.Started()).Seconds(), Draining: src.Draining(), Decisions: src.Decisions(),
		Bindings: src.Bindings(), Generation: number, DNS: src.DNS(), Queue: queueState(p, src.Queue())}
	groups := engineGroups(p)
	picks := sumBy(byName["router_picks_total"], "engine")
	rejections := sumBy(byName["router_admission_rejections_total"], "engine")
	for _, m := range src.EngineStatuses() {
		e := m.Engine
		es := EngineState{
			ID: e.ID, URL: plan.RedactURL(e.URL), Model: e.Model, Role: e.Role, Groups: groups[e.ID], State: m.State, Origin: m.Origin,
			Healthy: m.Healthy, Breaker: m.Breaker, Inflight: m.Inflight, Load: m.Load, ReportAgeMS: -1,
			Picks: picks[e.ID], Rejections: rejections[e.ID],
			HealthError: m.HealthError, LoadError: m.LoadError, PrefixIndex: m.PrefixIndex,
		}
		if m.Load != nil {
			es.ReportAgeMS = float64(time.Since(m.LoadAt).Microseconds()) / 1000
		}
		st.Engines = append(st.Engines, es)
	}
	st.Buckets = bucketStates(p, src, byName)
	return st, nil
}

// bucketStates are the plan's buckets with their counters and SLO estimates.
func bucketStates(p *plan.Plan, src StateSource, byName map[string]*dto.MetricFamily) []BucketState {
	var out []BucketState
	requests := sumBy(byName["router_requests_total"], "model", "bucket")
	fallthroughs := sumBy(byName["router_bucket_fallthroughs_total"], "model", "bucket")
	byStatus := sumBy(byName["router_requests_total"], "model", "bucket", "status")
	sloCounts := sumBy(byName["router_slo_selections_total"], "model", "bucket", "outcome", "target")
	for _, m := range p.Models {
		estimates := map[string]*slo.Estimates{}
		if sm := src.Models().Get(m.Name); sm != nil {
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
			out = append(out, bs)
		}
	}
	return out
}

// queueState is the queue's size, slots and waiting requests per model of p.
func queueState(p *plan.Plan, q *queue.Queue) *QueueState {
	st := &QueueState{Size: q.Size(), TimeoutMS: p.Queue.TimeoutMS, Running: q.Running(),
		MaxConcurrent: p.Limits.MaxConcurrentRequests, RateLimit: p.RateLimit, Waiting: map[string]int{}}
	for _, m := range p.Models {
		st.Waiting[m.Name] = q.Waiting(m.Name)
	}
	return st
}

// engineGroups names, per engine, the groups that may pick it as "bucket/stage". A group
// without worker_ids takes every engine of its model and role.
func engineGroups(p *plan.Plan) map[string][]string {
	out := map[string][]string{}
	add := func(model string, b plan.Bucket, g *plan.Group, role plan.Role) {
		for _, e := range p.Engines {
			if e.Model == model && e.Role == role && (g.WorkerIDs == nil || slices.Contains(g.WorkerIDs, e.ID)) {
				out[e.ID] = append(out[e.ID], b.ID+"/"+string(role))
			}
		}
	}
	for _, m := range p.Models {
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

// sumBy sums a counter family's series grouped by the values of labels, joined by NUL.
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
