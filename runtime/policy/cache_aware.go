package policy

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// CacheAware sends a request to an engine that already holds a long prefix of it, under
// cache and pressure rules, and falls back to load on a miss (docs/design.md,
// Policies). It serves plain and prefill groups; prefixes do not matter to decode.
//
// A pick runs these steps within the group's candidates:
//
//  1. Look up prefix ownership in its CacheSource, once per request (see WithPrefixMemo).
//     A request without token ids, a miss and an unavailable source all go to step 6.
//  2. Hit gate: keep holders of at least min_matched_tokens and, when set,
//     min_match_ratio of the input.
//  3. Bound the holders to K = min(candidates, max, max(min, ceil(ratio × candidates))),
//     by longest prefix, then lower pressure, then id.
//  4. Soft queue gate: a holder with worker_queue_limit or more reported waiting requests
//     cannot win on affinity; without a fresh report it passes. When the gate removes
//     every holder and no candidate of the group has a fresh queue below
//     saturation_queue_floor, switching gains nothing, so the least-pressured holder is
//     pinned. Every remaining holder, pinned or not, is checked with hard admission;
//     when all are rejected the pick fails with every rejection (no cold fallback).
//  5. Choose the admitted holder with the least uncached work (input minus prefix), then
//     lower pressure, then id. With the pressure guard on, a holder whose uncached work is
//     within switch_margin_tokens of the best may win instead when the best is busier by
//     more than the absolute threshold and by more than rel_threshold times; this needs a
//     fresh native report from every holder in that window.
//  6. Otherwise fall back to load: sample min_load_choices candidates (all of them when
//     that covers the group, exactly one for uniform random) from those the soft queue gate
//     admits, or from all when it admits none, take the least pressured with random ties,
//     and check it with hard admission.
//
// Pressure is compared at the precision every compared engine supports (estimated queue
// time, reported prefill work and queues, or router in-flight requests only), which makes
// the order total.
type CacheAware struct {
	source CacheSource
	load   *load.Table
	rand   Rand
	limits Limits
	tune   cacheTuning

	reasonSampled string
}

// cacheTuning is a cache-aware attachment's tuning with defaults applied.
type cacheTuning struct {
	minMatched   int64
	minRatio     float64 // 0: no ratio gate
	candMin      int
	candRatio    float64
	candMax      int
	switchMargin int64
	queueLimit   int64 // 0: no soft queue gate
	satFloor     int64 // 0: no saturation pin
	loadChoices  int
	guard        *plan.PressureGuard // nil or disabled: no guard
}

// NewCacheAware returns a cache-aware policy looking up prefixes in source. Tuning comes
// from the attachment; the compiler fills its defaults, and zero values a programmatic
// plan leaves behave as: no hit gate, no ratio gate, at least one candidate, no candidate
// maximum, no switch margin, two load choices, no queue gate, no pressure guard.
func NewCacheAware(source CacheSource, table *load.Table, rnd Rand, limits Limits, p plan.Policy) *CacheAware {
	t := cacheTuning{
		minMatched:   valueOr0(p.MinMatchedTokens),
		candMin:      max(p.CandidateMinWorkers, 1),
		candRatio:    p.CandidateRatio,
		candMax:      p.CandidateMaxWorkers,
		switchMargin: valueOr0(p.SwitchMarginTokens),
		queueLimit:   p.WorkerQueueLimit,
		satFloor:     p.SaturationQueueFloor,
		loadChoices:  p.MinLoadChoices,
	}
	if p.MinMatchRatio != nil {
		t.minRatio = *p.MinMatchRatio
	}
	if t.candMax <= 0 {
		t.candMax = math.MaxInt
	}
	if t.loadChoices <= 0 {
		t.loadChoices = 2
	}
	if g := p.PressureGuard; g != nil && g.Enabled {
		t.guard = g
	}
	return &CacheAware{source: source, load: table, rand: rnd, limits: limits, tune: t,
		reasonSampled: fmt.Sprintf("no usable prefix holder; least pressure of %d sampled candidates", t.loadChoices)}
}

// Reasons given by CacheAware picks. The trace's prefix record and notes say why no
// holder was usable.
const (
	reasonLongestPrefix = "prefix holder with the least uncached work"
	reasonPressureGuard = "prefix holder within the switch margin; the pressure guard moved off a busier holder"
	reasonSaturationPin = "every candidate queued past the saturation floor; kept the least-pressured prefix holder"
	reasonMissExact     = "no usable prefix holder; least pressure in the group"
	reasonMissRandom    = "no usable prefix holder; uniform random choice (min_load_choices 1)"
)

// Pick implements Policy.
func (p *CacheAware) Pick(ctx context.Context, engines []*engine.Worker, req *Request) (Pick, error) {
	if req.Stage == plan.RoleDecode {
		// The compiler rejects this; a plan built in code is stopped here.
		return Pick{}, &InvalidConfiguration{Msg: "cache_aware cannot select decode engines: prefix reuse happens at prefill"}
	}
	if len(engines) == 0 {
		return noCandidates(req)
	}
	rec := req.Pass.Rec()
	now := p.load.Now()
	var buf [8]obs // holders of typical groups, without allocating
	holders, err := p.holders(ctx, rec, engines, req, now, buf[:0])
	if err != nil {
		return Pick{}, err
	}
	if len(holders) == 0 {
		return p.fallback(rec, engines, req, now)
	}
	usable, pinned := p.queueGate(rec, holders, engines, now, req.InputTokens)
	if len(usable) == 0 {
		return p.fallback(rec, engines, req, now)
	}
	admitted := usable[:0]
	var rejected []*AdmissionRejected
	for _, o := range usable {
		if rej := p.limits.admit(rec, o.w, req.Stage, o.r); rej != nil {
			rejected = append(rejected, rej)
			continue
		}
		admitted = append(admitted, o)
	}
	if len(admitted) == 0 {
		return Pick{}, &NoAdmissibleEngine{Stage: req.Stage, Rejections: rejected}
	}
	if pinned {
		return Pick{Engine: admitted[0].w, Reason: reasonSaturationPin, PrefixTokens: admitted[0].matched}, nil
	}
	o, reason := p.choose(rec, admitted, req.InputTokens)
	return Pick{Engine: o.w, Reason: reason, PrefixTokens: o.matched}, nil
}

// holders runs steps 1 to 3: the candidates holding a usable prefix, bounded and ordered
// by prefix length, pressure and id, with their loads. It appends to dst.
func (p *CacheAware) holders(ctx context.Context, rec *decision.Trace, engines []*engine.Worker, req *Request, now load.Instant, dst []obs) ([]obs, error) {
	if len(req.TokenIDs) == 0 {
		if rec.Detailed() {
			rec.PrefixLookup(decision.Prefix{Source: p.source.Name(), Outcome: decision.PrefixNoTokens})
		}
		return nil, nil
	}
	res, err := lookupPrefix(ctx, req.Pass, p.source, req.Model, req.TokenIDs)
	if err != nil {
		return nil, &InvalidConfiguration{Msg: fmt.Sprintf("prefix lookup in %s: %v", p.source.Name(), err)}
	}
	for id, tokens := range res.Matched {
		if w := candidate(engines, id); w != nil {
			dst = append(dst, obs{w: w, matched: min(tokens, req.InputTokens)})
		}
	}
	slices.SortFunc(dst, func(a, b obs) int { return cmp.Compare(a.w.ID(), b.w.ID()) }) // map order is random
	if rec.Detailed() {
		rec.PrefixLookup(prefixRecord(p.source.Name(), &res, dst))
	}

	kept := dst[:0]
	for _, o := range dst {
		if o.matched >= p.tune.minMatched && float64(o.matched) >= p.tune.minRatio*float64(req.InputTokens) {
			kept = append(kept, o)
		}
	}
	if rec.Detailed() && len(kept) < len(dst) {
		rec.Note(fmt.Sprintf("hit gate: %d of %d prefix holders below min_matched_tokens %d or the match ratio",
			len(dst)-len(kept), len(dst), p.tune.minMatched))
	}
	if len(kept) == 0 {
		return nil, nil
	}
	for i := range kept {
		matched := kept[i].matched
		kept[i] = observe(rec, p.load, kept[i].w, now)
		kept[i].matched = matched
	}
	lv := levelOf(kept, req.InputTokens)
	slices.SortFunc(kept, func(a, b obs) int {
		return cmp.Or(cmp.Compare(b.matched, a.matched), lv.compare(&a, &b), cmp.Compare(a.w.ID(), b.w.ID()))
	})
	if k := p.candidateBound(len(engines)); len(kept) > k {
		if rec.Detailed() {
			rec.Note(fmt.Sprintf("candidate bound: kept %d of %d prefix holders", k, len(kept)))
		}
		kept = kept[:k]
	}
	return kept, nil
}

// candidateBound is K of step 3 for a group of n candidates.
func (p *CacheAware) candidateBound(n int) int {
	byRatio := int(math.Ceil(p.tune.candRatio * float64(n)))
	return min(n, p.tune.candMax, max(p.tune.candMin, byRatio))
}

func prefixRecord(source string, res *PrefixResult, holders []obs) decision.Prefix {
	d := decision.Prefix{Source: source, Outcome: res.outcome(), Detail: res.Detail}
	for _, o := range holders {
		d.Matches = append(d.Matches, decision.PrefixMatch{Engine: o.w.ID(), Tokens: o.matched})
	}
	return d
}

// overQueue reports whether the soft queue gate keeps o from winning on affinity: a fresh
// report of limit or more waiting requests, summed over ranks. Unknown load passes.
func overQueue(o *obs, limit int64) bool {
	return limit > 0 && o.r != nil && o.r.Waiting >= limit
}

// queueGate runs step 4: the holders the soft queue gate admits or, under saturation, the
// pinned holder alone. Holders stay in order.
func (p *CacheAware) queueGate(rec *decision.Trace, holders []obs, engines []*engine.Worker, now load.Instant, input int64) ([]obs, bool) {
	if p.tune.queueLimit <= 0 {
		return holders, false
	}
	var usable []obs
	for i := range holders {
		if !overQueue(&holders[i], p.tune.queueLimit) {
			usable = append(usable, holders[i])
		} else if rec.Detailed() {
			rec.Note(fmt.Sprintf("queue gate: %s has %d waiting requests (worker_queue_limit %d); it cannot win on affinity",
				holders[i].w.ID(), holders[i].r.Waiting, p.tune.queueLimit))
		}
	}
	if len(usable) > 0 || p.tune.satFloor <= 0 || p.belowFloor(rec, engines, now) {
		return usable, false
	}
	lv := levelOf(holders, input)
	pin := &holders[0]
	for i := range holders[1:] {
		if o := &holders[i+1]; cmp.Or(lv.compare(o, pin), cmp.Compare(o.w.ID(), pin.w.ID())) < 0 {
			pin = o
		}
	}
	if rec.Detailed() {
		rec.Note(fmt.Sprintf("saturation: no candidate has a fresh queue below %d; pinned %s", p.tune.satFloor, pin.w.ID()))
	}
	return []obs{*pin}, true
}

// belowFloor reports whether some candidate provably has fewer waiting requests than the
// saturation floor: a fresh report says so. Saturation looks at the group only.
func (p *CacheAware) belowFloor(rec *decision.Trace, engines []*engine.Worker, now load.Instant) bool {
	for _, w := range engines {
		if o := observe(rec, p.load, w, now); o.r != nil && o.r.Waiting < p.tune.satFloor {
			return true
		}
	}
	return false
}

// choose runs step 5 over admitted holders.
func (p *CacheAware) choose(rec *decision.Trace, admitted []obs, input int64) (*obs, string) {
	uncached := func(o *obs) int64 { return input - o.matched }
	lv := levelOf(admitted, input)
	best := &admitted[0]
	for i := range admitted[1:] {
		o := &admitted[i+1]
		if cmp.Or(cmp.Compare(uncached(o), uncached(best)), lv.compare(o, best), cmp.Compare(o.w.ID(), best.w.ID())) < 0 {
			best = o
		}
	}
	g := p.tune.guard
	if g == nil {
		return best, reasonLongestPrefix
	}
	var wbuf [8]int // indices rather than pointers, so that admitted stays on the caller's stack
	window := wbuf[:0]
	useMS := g.AbsThresholdMS != nil
	for i := range admitted {
		o := &admitted[i]
		if uncached(o) > uncached(best)+p.tune.switchMargin {
			continue
		}
		if o.r == nil || !o.r.ValidCapacity() {
			return best, reasonLongestPrefix // the guard needs every contender's report
		}
		useMS = useMS && o.r.HasQueueMS
		window = append(window, i)
	}
	// pressure is the work queued ahead of the request on o: estimated queue time, or
	// waiting uncached tokens plus this request's own uncached tokens there.
	pressure := func(o *obs) float64 {
		if useMS {
			return o.r.QueueMS
		}
		return float64(o.r.WaitingUncachedTokens + uncached(o))
	}
	alt := best
	for _, i := range window {
		o := &admitted[i]
		if cmp.Or(cmp.Compare(pressure(o), pressure(alt)), cmp.Compare(uncached(o), uncached(alt)), cmp.Compare(o.w.ID(), alt.w.ID())) < 0 {
			alt = o
		}
	}
	abs := float64(g.AbsThresholdTokens)
	if useMS {
		abs = *g.AbsThresholdMS
	}
	pb, pa := pressure(best), pressure(alt)
	if alt == best || pb-pa <= abs || pb <= g.RelThreshold*pa {
		return best, reasonLongestPrefix
	}
	if rec.Detailed() {
		unit := " tokens"
		if useMS {
			unit = " ms"
		}
		rec.Note("pressure guard: " + best.w.ID() + " has " + strconv.FormatFloat(pb, 'f', -1, 64) + unit + " of work ahead, " +
			alt.w.ID() + " has " + strconv.FormatFloat(pa, 'f', -1, 64) + unit)
	}
	return alt, reasonPressureGuard
}

func valueOr0(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}
