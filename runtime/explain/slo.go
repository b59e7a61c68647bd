package explain

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/slo"
)

// checkTargets refuses targets that are not positive finite numbers, as serving refuses
// such a header.
func (r *Request) checkTargets() error {
	for _, t := range []struct {
		header string
		v      float64
	}{{slo.TTFTHeader, r.TTFTSLOMS}, {slo.TPSHeader, r.TPSSLO}} {
		if t.v < 0 || math.IsNaN(t.v) || math.IsInf(t.v, 0) {
			return &slo.InvalidTarget{Header: t.header, Value: fmt.Sprint(t.v)}
		}
	}
	return nil
}

// writeSLO writes the request's targets and, bucket by bucket in try order, each
// estimate against them and the penalty that placed the bucket.
func (x *Explanation) writeSLO(w io.Writer) {
	if x.Targets == nil {
		return
	}
	var ts []string
	if x.Targets.TTFTMS > 0 {
		ts = append(ts, fmt.Sprintf("TTFT at most %s ms", num(x.Targets.TTFTMS)))
	}
	if x.Targets.TPS > 0 {
		ts = append(ts, fmt.Sprintf("at least %s tokens/s", num(x.Targets.TPS)))
	}
	fmt.Fprintf(w, "slo targets: %s\n", strings.Join(ts, ", "))
	if len(x.SLO) == 0 {
		fmt.Fprintln(w, "slo ordering: off for these targets (their preferences in the model's slo are disabled): buckets keep capacity, rank, id order")
		return
	}
	fmt.Fprintln(w, "slo ordering: fewer penalties first, ties in capacity, rank, id order:")
	for _, r := range x.SLO {
		var cs []string
		for _, c := range r.Checks {
			cs = append(cs, checkText(c))
		}
		fmt.Fprintf(w, "  %s: penalty %d: %s\n", r.Bucket, r.Penalty, strings.Join(cs, "; "))
	}
}

func checkText(c decision.SLOCheck) string {
	unit, cmp := "ms", "at most"
	if c.Target == "tps" {
		unit, cmp = "tokens/s", "at least"
	}
	est := "no estimate"
	if c.Source != slo.SourceNone {
		est = fmt.Sprintf("estimate %s %s (%s)", num(c.Estimate), unit, c.Source)
	}
	verdict := "misses"
	if c.Met {
		verdict = "meets"
	}
	why := "no penalty"
	switch {
	case c.Penalized && c.Preference == plan.SLOFirst:
		why = "penalty: slo_first tries buckets meeting it first"
	case c.Penalized:
		why = "penalty: best_effort prefers buckets meeting it"
	}
	return fmt.Sprintf("%s %s %s target %s %s %s (%s, %s)", c.Target, est, verdict, cmp, num(c.Want), unit, c.Preference, why)
}

// num prints a target or estimate in its shortest exact form: 80, 45.5.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
