// Package tui is the terminal monitor behind `router top`: a bubbletea program that polls
// a running router's GET /admin/state and shows its engines, buckets and recent routing
// decisions.
//
// It talks to the router over HTTP only and never imports the server: the snapshot types
// below are its own reading of the JSON, so a router one version ahead or behind still
// renders. Polling goes through an injected FetchFunc and clock, so the model is a pure
// function of the messages it receives and tests drive it through Update and View.
package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
)

// State is one /admin/state snapshot as the monitor reads it. Counters (picks, rejections,
// requests, fall-throughs) are cumulative totals since the router started; the monitor
// turns them into rates from the difference between two polls.
type State struct {
	Time      time.Time  `json:"time"`
	UptimeS   float64    `json:"uptime_s"`
	Draining  bool       `json:"draining"`
	Engines   []Engine   `json:"engines"`
	Buckets   []Bucket   `json:"buckets"`
	Decisions []Decision `json:"decisions"`
	// Queue is nil from a router that predates the queue.
	Queue *Queue `json:"queue"`
}

// Queue is the router's concurrency limit and the requests waiting per model.
type Queue struct {
	Size          int            `json:"size"`
	Running       int            `json:"running"`
	MaxConcurrent int            `json:"max_concurrent_requests"`
	Waiting       map[string]int `json:"waiting"`
}

// summary is the queue for the title line: "3/1024 running · 5 waiting (llama 5) of 100
// per model"; the waiting part only when requests may wait.
func (q *Queue) summary() string {
	s := fmt.Sprintf("%d/%d running", q.Running, q.MaxConcurrent)
	if q.Size == 0 {
		return s
	}
	total := 0
	var by []string
	for _, model := range slices.Sorted(maps.Keys(q.Waiting)) {
		if n := q.Waiting[model]; n > 0 {
			total += n
			by = append(by, fmt.Sprintf("%s %d", model, n))
		}
	}
	s += fmt.Sprintf(" · %d waiting", total)
	if len(by) > 0 {
		s += " (" + strings.Join(by, ", ") + ")"
	}
	return s + fmt.Sprintf(" of %d per model", q.Size)
}

// Engine is one engine as the router sees it.
type Engine struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Model  string   `json:"model"`
	Role   string   `json:"role"`
	Groups []string `json:"groups"` // "bucket/stage"
	// State is serving, draining (no new picks) or leaving (removed, finishing its
	// requests); "" from a router that predates membership changes.
	State string `json:"state"`
	// Origin is config, admin or dns.
	Origin  string `json:"origin"`
	Healthy bool   `json:"healthy"`
	// Breaker is the circuit breaker's state: closed, open or half_open ("" from a
	// router that predates breakers).
	Breaker  string `json:"breaker"`
	Inflight int64  `json:"inflight"`
	// Load is nil when the router holds no usable (fresh, complete) load report.
	Load *Load `json:"load"`
	// ReportAgeMS is the age of the usable report, negative when there is none.
	ReportAgeMS float64 `json:"report_age_ms"`
	Picks       float64 `json:"picks"`
	Rejections  float64 `json:"admission_rejections"`
	HealthError string  `json:"health_error"`
	LoadError   string  `json:"load_error"`
	// PrefixIndex is the engine's size in each of the router's prefix indexes; empty when
	// no cache-aware source indexes it, or the router predates the field.
	PrefixIndex []PrefixIndex `json:"prefix_index"`
}

// PrefixIndex is an engine's size in one prefix index: "local_index" (fed by KV events)
// or "approximate" (learned from the router's dispatches).
type PrefixIndex struct {
	Source         string `json:"source"`
	Blocks         int64  `json:"blocks"`
	Tokens         int64  `json:"tokens"`
	CapacityTokens int64  `json:"capacity_tokens"`
}

// Load is an engine's last usable load report. The capacity fields mean something only
// when Native is set: older ("basic") publishers report running and waiting only, and
// vLLM's /metrics add KV usage and capacity (KVKnown).
type Load struct {
	Running      int64 `json:"running"`
	Waiting      int64 `json:"waiting"`
	Native       bool  `json:"native"`
	KVKnown      bool  `json:"kv_known"`
	UsedKVTokens int64 `json:"used_kv_tokens"`
	MaxKVTokens  int64 `json:"max_kv_tokens"`
	MaxRunning   int64 `json:"max_running"`
}

// Bucket is one bucket's cumulative counters.
type Bucket struct {
	Model        string             `json:"model"`
	ID           string             `json:"id"`
	Requests     float64            `json:"requests"`
	Fallthroughs float64            `json:"fallthroughs"`
	ByStatus     map[string]float64 `json:"by_status"`
	// TTFTEstimate and TPSEstimate are the bucket's SLO estimates now; nil when the
	// bucket has none.
	TTFTEstimate *Estimate `json:"ttft_estimate,omitempty"`
	TPSEstimate  *Estimate `json:"tps_estimate,omitempty"`
	// SLOMet and SLOMissed count, by target (ttft, tps), the selections of the bucket whose
	// estimate met or missed the request's target.
	SLOMet    map[string]float64 `json:"slo_met,omitempty"`
	SLOMissed map[string]float64 `json:"slo_missed,omitempty"`
}

// Estimate is a bucket's SLO estimate: ms for TTFT, tokens per second for TPS, and where it
// comes from (configured, learned or none).
type Estimate struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
}

// Decision is one request's routing outcome: the bucket and engines per stage with the
// policies' reasons, or the error it was answered with.
type Decision struct {
	Time         time.Time         `json:"time"`
	Model        string            `json:"model"`
	InputTokens  int64             `json:"input_tokens"`
	Bucket       string            `json:"bucket"`
	Engines      map[string]string `json:"engines"`
	Reasons      map[string]string `json:"reasons"`
	Fallthroughs int               `json:"fallthroughs"`
	Status       int               `json:"status"`
	Error        string            `json:"error"`
	DurationMS   float64           `json:"duration_ms"`
}

// ErrMalformed marks a response that is not a snapshot: not JSON, a field of the wrong
// type, or not an object at all.
var ErrMalformed = errors.New("malformed snapshot")

// Decode reads a snapshot. Unknown fields are ignored and missing ones stay zero, so
// routers of other versions still render; anything else that is wrong is ErrMalformed.
// Every string comes back with its control characters replaced (see clean), so that no
// id, name or error the router passes on can reach the terminal as an escape sequence or
// a line break.
func Decode(data []byte) (*State, error) {
	var st *State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if st == nil {
		return nil, fmt.Errorf("%w: null instead of an object", ErrMalformed)
	}
	st.clean()
	return st, nil
}

// clean replaces the control characters of every string in the snapshot, map keys
// included. It is the one place where text from the router is made safe to print.
func (st *State) clean() {
	for i := range st.Engines {
		e := &st.Engines[i]
		for _, f := range []*string{&e.ID, &e.URL, &e.Model, &e.Role, &e.HealthError, &e.LoadError, &e.Breaker, &e.State, &e.Origin} {
			*f = clean(*f)
		}
		for j := range e.Groups {
			e.Groups[j] = clean(e.Groups[j])
		}
		for j := range e.PrefixIndex {
			e.PrefixIndex[j].Source = clean(e.PrefixIndex[j].Source)
		}
	}
	for i := range st.Buckets {
		b := &st.Buckets[i]
		b.Model, b.ID = clean(b.Model), clean(b.ID)
		add := func(x, y float64) float64 { return x + y }
		b.ByStatus, b.SLOMet, b.SLOMissed = cleanKeys(b.ByStatus, add), cleanKeys(b.SLOMet, add), cleanKeys(b.SLOMissed, add)
		for _, e := range []*Estimate{b.TTFTEstimate, b.TPSEstimate} {
			if e != nil {
				e.Source = clean(e.Source)
			}
		}
	}
	for i := range st.Decisions {
		d := &st.Decisions[i]
		d.Model, d.Bucket, d.Error = clean(d.Model), clean(d.Bucket), clean(d.Error)
		d.Engines, d.Reasons = cleanStrings(d.Engines), cleanStrings(d.Reasons)
	}
	if st.Queue != nil {
		st.Queue.Waiting = cleanKeys(st.Queue.Waiting, func(x, y int) int { return x + y })
	}
}

// clean replaces each control character of s (C0 such as ESC, CR, LF and tab; DEL; C1)
// with U+FFFD, which shows where it was without acting on the terminal.
func clean(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return unicode.ReplacementChar
		}
		return r
	}, s)
}

// cleanStrings cleans a map's keys and values; keys that clean to the same one keep the
// value of the first in byte order.
func cleanStrings(m map[string]string) map[string]string {
	m = cleanKeys(m, func(first, _ string) string { return first })
	for k, v := range m {
		m[k] = clean(v)
	}
	return m
}

// cleanKeys returns m with its keys cleaned, m itself when none needs it. Keys that clean
// to the same one are merged with merge, in byte order, so the outcome is deterministic.
func cleanKeys[V any](m map[string]V, merge func(V, V) V) map[string]V {
	dirty := false
	for k := range m {
		dirty = dirty || clean(k) != k
	}
	if !dirty {
		return m
	}
	out := make(map[string]V, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ck := clean(k)
		if v, ok := out[ck]; ok {
			out[ck] = merge(v, m[k])
		} else {
			out[ck] = m[k]
		}
	}
	return out
}
