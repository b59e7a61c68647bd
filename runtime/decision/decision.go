// Package decision records what engine selection saw and decided for one request: the
// compatible buckets and why the others were excluded, each bucket attempt with its groups'
// candidates, the loads the policies read, their picks and reasons, admission verdicts and
// errors.
//
// A Trace travels in the selection pass (policy.Pass), so `router explain` runs exactly the
// serving code path and reads the trace afterwards. Every method is a no-op on a nil
// *Trace, and callers pass only values they already hold, so selection without a trace in
// its pass records nothing and allocates nothing.
package decision

import (
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// Trace is the record of one selection pass. A pass is sequential, so a Trace is not safe
// for concurrent use.
type Trace struct {
	// Resolved lists the compatible bucket ids in the order they are tried.
	Resolved []string `json:"resolved"`
	// Excluded lists the model's other buckets with the reason each was not compatible.
	Excluded []Exclusion `json:"excluded"`
	// SLO is set when the request's latency targets ordered the compatible buckets: each
	// one's estimates against the targets, in try order.
	SLO []SLORank `json:"slo,omitempty"`
	// Attempts lists the buckets tried, in order.
	Attempts []Attempt `json:"attempts"`

	// summary marks a trace from NewSummary.
	summary bool
}

// NewSummary returns a trace that records only what serving a request needs for its
// metrics and its decision record: the attempts with their errors, each group's stage,
// policy, pick or error, and the admission rejections. Resolution, candidates, observed
// loads, prefix lookups, admitted verdicts and notes are what explain shows; leaving them
// out keeps their cost off the request path.
func NewSummary() *Trace { return &Trace{summary: true} }

// Detailed reports whether t records everything, as explain's trace does. A policy
// builds a note's text only when it is, since a summary drops it.
func (t *Trace) Detailed() bool { return t != nil && !t.summary }

// Exclusion is a bucket that cannot take the request and why.
type Exclusion struct {
	Bucket string `json:"bucket"`
	Reason string `json:"reason"`
}

// SLORank is where SLO ordering put a compatible bucket, and why. Buckets of equal
// Penalty keep the design's order: smaller input capacity, lower rank, then id.
type SLORank struct {
	Bucket string `json:"bucket"`
	// Penalty is the number of the model's preferences the bucket does not satisfy.
	Penalty int        `json:"penalty"`
	Checks  []SLOCheck `json:"checks"`
}

// SLOCheck is one target compared with a bucket's estimate.
type SLOCheck struct {
	// Target is "ttft" (ms, met at or below) or "tps" (tokens/s, met at or above).
	Target     string  `json:"target"`
	Want       float64 `json:"want"`
	Preference string  `json:"preference"`
	// Estimate and Source are the bucket's estimate; Source "none" has no estimate,
	// which meets no target.
	Estimate float64 `json:"estimate,omitempty"`
	Source   string  `json:"source"`
	Met      bool    `json:"met"`
	// Penalized reports that the check added to the bucket's penalty: its target was
	// missed (a slo_first miss weighs more than a best_effort one).
	Penalized bool `json:"penalized"`
}

// RankSLO records SLO ordering's verdict on a compatible bucket, in try order.
func (t *Trace) RankSLO(r SLORank) {
	if t.Detailed() {
		t.SLO = append(t.SLO, r)
	}
}

// Attempt is one bucket's try at a complete selection.
type Attempt struct {
	Bucket string  `json:"bucket"`
	Groups []Group `json:"groups"`
	// Error is why the attempt failed, or empty when it supplied the selection.
	Error string `json:"error,omitempty"`
}

// Group is one engine group's pick within an attempt.
type Group struct {
	Stage      plan.Role       `json:"stage"`
	Policy     plan.PolicyType `json:"policy"`
	Candidates []Candidate     `json:"candidates"`
	// Observed lists the engines whose load the policy read, with what it read.
	Observed  []Observation `json:"observed"`
	Admission []Verdict     `json:"admission"`
	// Prefix is the cache-aware policy's prefix lookup; nil for other policies.
	Prefix *Prefix `json:"prefix,omitempty"`
	// Notes are the policy's intermediate decisions, in order: affinity bindings reused,
	// written or skipped, cache gates applied, fallbacks taken. They say why the pick is
	// what it is when Reason alone does not.
	Notes  []string `json:"notes,omitempty"`
	Pick   string   `json:"pick,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// Candidate is a healthy member of a group at pick time.
type Candidate struct {
	ID       string `json:"id"`
	Inflight int64  `json:"inflight"`
}

// Observation is a load read by a policy. A nil Load means the report was missing, stale
// or rank-incomplete: unknown.
type Observation struct {
	Engine   string       `json:"engine"`
	Load     *load.Report `json:"load"`
	Inflight int64        `json:"inflight"`
}

// Verdict is one admission check. A rejection names the cap, the engine's metric and the
// cap's value.
type Verdict struct {
	Engine   string `json:"engine"`
	Admitted bool   `json:"admitted"`
	Limit    string `json:"limit,omitempty"`
	Value    int64  `json:"value,omitempty"`
	Cap      int64  `json:"cap,omitempty"`
}

// Prefix is a prefix-ownership lookup as the cache-aware policy saw it. A confirmed miss
// and an unavailable backend both lead to the load fallback; Outcome keeps them apart.
type Prefix struct {
	// Source is "local_index" or "remote_indexer".
	Source string `json:"source"`
	// Outcome is one of the Prefix* constants.
	Outcome string `json:"outcome"`
	// Detail says why the backend was unavailable.
	Detail string `json:"detail,omitempty"`
	// Matches are the group's candidates holding a prefix of the request, in candidate
	// order, with the prefix length in tokens.
	Matches []PrefixMatch `json:"matches,omitempty"`
}

// Outcomes of a prefix lookup.
const (
	// PrefixHit: the source answered and some engine of the model holds a prefix. The
	// group's candidates may still hold none.
	PrefixHit = "hit"
	// PrefixMiss: the source answered and no engine of the model holds a prefix.
	PrefixMiss = "miss"
	// PrefixUnavailable: the source could not answer (timeout, connection error, overload).
	PrefixUnavailable = "unavailable"
	// PrefixNoTokens: the request carries no token ids, so there was nothing to look up.
	PrefixNoTokens = "no_tokens"
)

// PrefixMatch is one engine's cached prefix of the request.
type PrefixMatch struct {
	Engine string `json:"engine"`
	Tokens int64  `json:"tokens"`
}

// Compatible records a bucket that resolution kept, in try order.
func (t *Trace) Compatible(bucket string) {
	if t.Detailed() {
		t.Resolved = append(t.Resolved, bucket)
	}
}

// Exclude records a bucket that resolution dropped.
func (t *Trace) Exclude(bucket, reason string) {
	if t.Detailed() {
		t.Excluded = append(t.Excluded, Exclusion{Bucket: bucket, Reason: reason})
	}
}

// BeginAttempt opens the record of a bucket attempt.
func (t *Trace) BeginAttempt(bucket string) {
	if t != nil {
		t.Attempts = append(t.Attempts, Attempt{Bucket: bucket})
	}
}

// EndAttempt closes the current attempt with its error, nil when it succeeded.
func (t *Trace) EndAttempt(err error) {
	if a := t.attempt(); a != nil && err != nil {
		a.Error = err.Error()
	}
}

// BeginGroup opens the record of a group pick with the candidates given to its policy.
func (t *Trace) BeginGroup(stage plan.Role, policy plan.PolicyType, candidates []*engine.Worker) {
	a := t.attempt()
	if a == nil {
		return
	}
	g := Group{Stage: stage, Policy: policy}
	if t.summary {
		a.Groups = append(a.Groups, g)
		return
	}
	g.Candidates = make([]Candidate, len(candidates))
	for i, w := range candidates {
		g.Candidates[i] = Candidate{ID: w.ID(), Inflight: w.Inflight()}
	}
	a.Groups = append(a.Groups, g)
}

// Observe records the load a policy read for w; r is nil when unknown. Reading the same
// report of the same engine again within a group, as a policy does when a later step
// looks at every candidate, adds nothing and is not recorded twice.
func (t *Trace) Observe(w *engine.Worker, r *load.Report) {
	g := t.group()
	if g == nil || t.summary {
		return
	}
	for _, o := range g.Observed {
		if o.Engine == w.ID() && o.Load == r {
			return
		}
	}
	g.Observed = append(g.Observed, Observation{Engine: w.ID(), Load: r, Inflight: w.Inflight()})
}

// Admit records an admission verdict for w. For a rejection, limit names the cap and
// value is the engine's metric.
func (t *Trace) Admit(w *engine.Worker, admitted bool, limit string, value, limitCap int64) {
	if g := t.group(); g != nil && (!admitted || !t.summary) {
		g.Admission = append(g.Admission, Verdict{Engine: w.ID(), Admitted: admitted, Limit: limit, Value: value, Cap: limitCap})
	}
}

// PrefixLookup records the current group's prefix lookup.
func (t *Trace) PrefixLookup(p Prefix) {
	if g := t.group(); g != nil && !t.summary {
		rec := p // copied here so that p does not escape, and a nil trace costs nothing
		g.Prefix = &rec
	}
}

// Note records an intermediate decision of the current group's policy. Build the message
// only when the trace is Detailed, so selection without one does not format strings.
func (t *Trace) Note(msg string) {
	if g := t.group(); g != nil && !t.summary {
		g.Notes = append(g.Notes, msg)
	}
}

// EndGroup closes the current group with its pick and reason, or its error.
func (t *Trace) EndGroup(pick *engine.Worker, reason string, err error) {
	g := t.group()
	if g == nil {
		return
	}
	if err != nil {
		g.Error = err.Error()
		return
	}
	g.Pick, g.Reason = pick.ID(), reason
}

func (t *Trace) attempt() *Attempt {
	if t == nil || len(t.Attempts) == 0 {
		return nil
	}
	return &t.Attempts[len(t.Attempts)-1]
}

func (t *Trace) group() *Group {
	a := t.attempt()
	if a == nil || len(a.Groups) == 0 {
		return nil
	}
	return &a.Groups[len(a.Groups)-1]
}
