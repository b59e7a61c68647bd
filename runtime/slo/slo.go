// Package slo holds what SLO-aware bucket ordering needs besides the buckets: a request's
// latency targets read from its headers, and a bucket's estimates, configured at capacity
// and learned from what the router observes, which the targets are compared with.
//
// The bucket resolver orders its compatible buckets with them; serving reads the targets
// and feeds the observations. Nothing here knows buckets, engines or HTTP beyond header
// values, so `router explain` compares the same estimates serving does.
package slo

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/plan"
)

// Request headers carrying a request's targets, as the experimental SGLang router reads
// them.
const (
	// TTFTHeader is the time-to-first-token target in milliseconds: a bucket meets it when
	// its estimate is at or below it.
	TTFTHeader = "x-sgl-ttft-slo-ms"
	// TPSHeader is the decode tokens-per-second target: a bucket meets it when its
	// estimate is at or above it.
	TPSHeader = "x-sgl-tps-slo"
)

// Targets are one request's latency targets; a zero field is no target.
type Targets struct {
	TTFTMS float64 `json:"ttft_ms,omitempty"`
	TPS    float64 `json:"tps,omitempty"`
}

// Any reports whether the request has a target.
func (t Targets) Any() bool { return t.TTFTMS > 0 || t.TPS > 0 }

// InvalidTarget is a target header whose value is not a positive finite number. Serving
// answers it 400 before any selection: a request whose target the router cannot read
// would otherwise be routed as if it had none.
type InvalidTarget struct {
	Header string
	Value  string
}

func (e *InvalidTarget) Error() string {
	return fmt.Sprintf("header %s: %q is not a positive number: give the target as a number greater than 0, e.g. %s: 200", e.Header, e.Value, e.Header)
}

// ParseTargets reads the target headers' values (empty when the header is absent) under
// the model's preferences. A header whose preference is disabled is ignored, whatever it
// holds, so that clients sending targets to a model that does not use them are not
// refused.
func ParseTargets(ttft, tps string, prefs plan.SLOPreferences) (Targets, error) {
	var t Targets
	var err error
	if enabled(prefs.TTFT) && ttft != "" {
		if t.TTFTMS, err = parsePositive(TTFTHeader, ttft); err != nil {
			return Targets{}, err
		}
	}
	if enabled(prefs.TPS) && tps != "" {
		if t.TPS, err = parsePositive(TPSHeader, tps); err != nil {
			return Targets{}, err
		}
	}
	return t, nil
}

func enabled(pref string) bool { return pref == plan.SLOFirst || pref == plan.SLOBestEffort }

func parsePositive(header, value string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, &InvalidTarget{Header: header, Value: value}
	}
	return v, nil
}
