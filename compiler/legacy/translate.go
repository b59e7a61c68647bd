package legacy

import (
	"fmt"
	"net"
	"strconv"
)

// worker is one worker of the legacy command line with the engine it becomes.
type worker struct {
	flag string // --worker-urls, --prefill or --decode
	url  string
	role string // plain, prefill or decode
	port *int64 // the bootstrap port of a --prefill worker
	id   string // the engine id the configuration gives it
}

// workers lists the command line's workers in the order given. sgl-router names workers by
// URL; engine ids cannot contain a URL's slashes, so each gets a short id by role and
// position, and its URL stays beside it.
func (c *cli) workers() []worker {
	var ws []worker
	for i, u := range c.workerURLs {
		ws = append(ws, worker{flag: "--worker-urls", url: u, role: "plain", id: fmt.Sprintf("worker-%d", i+1)})
	}
	for i, p := range c.prefill {
		ws = append(ws, worker{flag: "--prefill", url: p.url, role: stagePrefill, port: p.port, id: fmt.Sprintf("prefill-%d", i+1)})
	}
	for i, u := range c.decode {
		ws = append(ws, worker{flag: "--decode", url: u, role: stageDecode, id: fmt.Sprintf("decode-%d", i+1)})
	}
	return ws
}

// translator builds the target configuration from a command line that passed every rule.
type translator struct {
	c       *cli
	in      Input
	workers map[string]worker // by normalized URL
	// pendingBudget records that a bucket's max_pending_prefill_tokens became a cap, whose
	// meaning changed (see notes).
	pendingBudget bool
	// tokenizerNote says why the model's tokenizer could not be set, if it could not.
	tokenizerNote string
	// file is the bucket file, nil when there is none.
	file *bucketFile
	// estimated records which SLO estimates some migrated bucket has.
	estimated [2]bool
	// sloNotes say what became of the bucket file's SLO preferences.
	sloNotes []string
}

// The two SLO targets, indexing translator.estimated.
const (
	sloTTFT = iota
	sloTPS
)

func newTranslator(in Input, c *cli) *translator {
	t := &translator{c: c, in: in, workers: map[string]worker{}}
	for _, w := range c.workers() {
		t.workers[normalizeURL(w.url)] = w
	}
	return t
}

// config is the whole configuration, given its buckets.
func (t *translator) config(buckets []*node, bucketsFrom string) *node {
	c := t.c
	root := &node{}
	if c.host != nil || c.port != nil {
		host, port := "127.0.0.1", int64(30000)
		from := "sgl-router's default --host 127.0.0.1 with --port"
		if c.dialect == DialectClassic {
			// v0.3.2 binds 0.0.0.0 by default (127.0.0.1 until 2025-10).
			host, from = "0.0.0.0", "the classic router's default --host 0.0.0.0 with --port"
		}
		switch {
		case c.host != nil && c.port != nil:
			host, port, from = *c.host, *c.port, "--host and --port"
		case c.host != nil:
			host, from = *c.host, "--host with sgl-router's default --port 30000"
		default:
			port = *c.port
		}
		root.set("listen", net.JoinHostPort(host, strconv.FormatInt(port, 10)), from)
	}
	var engines []*node
	for _, w := range c.workers() {
		engines = append(engines, t.engine(w))
	}
	root.set("engines", engines, "")
	t.hardening(root)
	t.health(root)
	t.shutdownGrace(root)
	t.gateway(root)
	t.prefillAdmission(root)
	model := &node{}
	root.child("models").set(c.model, model, c.modelFrom)
	t.tokenizerNote = t.tokenizer(model)
	setGiven(model, "session_id_header", c.sessionIDHeader, "--session-id-header")
	setGiven(model, "session_idle_secs", c.sessionIdleSecs, "--session-idle-secs")
	setGiven(model, "session_eviction_interval_secs", c.sessionEvictionSecs, "--session-eviction-interval-secs")
	setGiven(model, "routing_key_header", c.routingKeyHeader, "--routing-key-header")
	setGiven(model, "sticky_idle_secs", c.stickyIdleSecs, "--sticky-idle-secs")
	setGiven(model, "sticky_eviction_interval_secs", c.stickyEvictionSecs, "--sticky-eviction-interval-secs")
	t.smgModel(model)
	t.sloPreferences(model)
	model.set("buckets", buckets, bucketsFrom)
	return root
}

// sloPreferences carries the bucket file's SLO policies over as the model's preferences.
// A policy no migrated bucket has an estimate for could not change any order in sgl-router
// (a bucket without an estimate met no target), so it stays disabled, and a note says so.
func (t *translator) sloPreferences(model *node) {
	f := t.file
	if f == nil {
		return
	}
	for _, s := range []struct {
		field, label, estimate string
		policy                 *string
		target                 int
	}{
		{"ttft_slo_policy", "ttft", "ttft_p95_at_capacity_ms", f.TTFTSLOPolicy, sloTTFT},
		{"tps_slo_policy", "tps", "tps_p05_at_capacity", f.TPSSLOPolicy, sloTPS},
	} {
		if s.policy == nil || *s.policy == "disabled" {
			continue
		}
		if !t.estimated[s.target] {
			t.sloNotes = append(t.sloNotes, fmt.Sprintf("%s %q is left disabled: no migrated bucket has a %s, so no bucket met a target and the policy changed no order.", s.field, *s.policy, s.estimate))
			continue
		}
		model.child("slo").set(s.label, *s.policy, f.name+": "+s.field)
	}
}

func (t *translator) engine(w worker) *node {
	e := &node{}
	e.set("id", w.id, "named by router migrate; sgl-router knew it by URL")
	e.set("url", normalizeURL(w.url), w.flag)
	e.set("model", t.c.model, t.c.modelFrom)
	role := w.flag
	if w.role == stagePrefill && w.port == nil {
		role += " without a bootstrap port: SGLang's default 8998 applies"
	}
	e.set("role", w.role, role)
	if w.port != nil {
		e.set("bootstrap_port", *w.port, "--prefill "+w.url+" "+strconv.FormatInt(*w.port, 10))
	}
	return e
}

// setGiven sets an optional flag's value when it was given; unset flags keep sgl-router's
// defaults, which are the configuration's defaults too.
func setGiven[T any](n *node, label string, v *T, from string) {
	if v != nil {
		n.set(label, *v, from)
	}
}

// admissionCap is one hard admission cap a legacy flag or bucket field configured.
type admissionCap struct {
	field string
	value int64
	from  string
}

// group is an engine group: its members (nil: every engine of its role) and policy.
func group(members []string, membersFrom string, policy *node) *node {
	g := &node{}
	if members != nil {
		g.set("worker_ids", members, membersFrom)
	}
	g.set("policy", policy, "")
	return g
}

// capacityChecked reports whether sgl-router's era-3 selection with policy checked each
// engine's reported capacity (running requests and KV tokens) before its pick
// (reference/sglang-router.md §1.7, §2.2). Decode selection, power_of_two, always did.
func capacityChecked(policy string) bool {
	switch policy {
	case "power_of_two", "session_aware", "cache_aware":
		return true
	}
	return false
}

// capacityCaps are the admission caps that keep sgl-router's implicit capacity check, as
// far as migrate's --engine-max-* flags give the engines' limits.
func (t *translator) capacityCaps() []admissionCap {
	var caps []admissionCap
	if n := t.in.EngineMaxRunningRequests; n != nil {
		caps = append(caps, admissionCap{"max_running_requests", *n, "--engine-max-running-requests: sgl-router's capacity check"})
	}
	if n := t.in.EngineMaxKVTokens; n != nil {
		caps = append(caps, admissionCap{"max_kv_tokens", *n, "--engine-max-kv-tokens: sgl-router's capacity check"})
	}
	return caps
}

// setAdmission sets the admission caps of policy p, if any.
func setAdmission(p *node, caps []admissionCap) {
	if len(caps) == 0 {
		return
	}
	a := p.child("admission")
	for _, cp := range caps {
		a.set(cp.field, cp.value, cp.from)
	}
}

// selectionPolicy is the policy of a plain or prefill group: --policy with its tuning, and
// the group's admission caps: --max-in-flight, the capacity check of the policies that
// had one, and the bucket's caps.
func (t *translator) selectionPolicy(bucketCaps []admissionCap) *node {
	c := t.c
	p := &node{}
	from := "sgl-router's default --policy"
	switch {
	case c.prefillPolicy != nil && c.pdMode():
		from = "--prefill-policy " + *c.prefillPolicy
	case c.policy != nil:
		from = "--policy " + *c.policy
	case c.dialect == DialectClassic:
		from = "the classic router's default --policy"
	case c.reorg():
		from = "--chat-routing reorg's default --policy power_of_n"
	}
	p.set("type", c.policyType(), from)
	var caps []admissionCap
	if c.maxInFlight != nil {
		caps = append(caps, admissionCap{"max_inflight_requests", *c.maxInFlight, "--filter overloaded --max-in-flight"})
	}
	if c.perWorkerCap != nil {
		caps = append(caps, admissionCap{"max_inflight_requests", *c.perWorkerCap, "--max-concurrent-requests-per-worker"})
	}
	role := "plain"
	if c.pdMode() {
		role = stagePrefill
	}
	caps = append(caps, c.smgCaps(role)...)
	if capacityChecked(c.policyType()) && c.dialect != DialectClassic {
		caps = append(caps, t.capacityCaps()...)
	}
	setAdmission(p, append(caps, bucketCaps...))
	switch c.policyType() {
	case "sticky":
		setGiven(p, "fallback", c.stickyFallback, "--sticky-fallback-policy")
		c.smgSticky(p, c.legacyPolicy())
	case "cache_aware":
		t.cacheTuning(p)
	}
	return p
}

// cacheTuning sets the cache_aware tuning flags that were given.
func (t *translator) cacheTuning(p *node) {
	c := t.c
	setGiven(p, "min_matched_tokens", c.minMatchedTokens, "--cache-affinity-min-matched-tokens")
	setGiven(p, "min_match_ratio", c.minMatchRatio, "--cache-affinity-min-match-ratio")
	setGiven(p, "min_match_ratio", c.cacheThreshold, "--cache-threshold")
	if c.dialect == DialectClassic {
		if c.cacheThreshold == nil {
			p.set("min_match_ratio", 0.3, "the classic router's default --cache-threshold 0.3")
		}
		if c.minMatchedTokens == nil {
			p.set("min_matched_tokens", int64(0), "the classic router gated on --cache-threshold alone")
		}
	}
	setGiven(p, "candidate_min_workers", c.candidateMinWorkers, "--cache-candidate-min-workers")
	setGiven(p, "candidate_ratio", c.candidateRatio, "--cache-candidate-ratio")
	setGiven(p, "candidate_max_workers", c.candidateMaxWorkers, "--cache-candidate-max-workers")
	setGiven(p, "switch_margin_tokens", c.switchMarginTokens, "--cache-switch-margin-tokens")
	setGiven(p, "worker_queue_limit", c.workerQueueLimit, "--worker-queue-limit")
	setGiven(p, "saturation_queue_floor", c.saturationQueueFloor, "--saturation-queue-floor")
	setGiven(p, "min_load_choices", c.minLoadChoices, "--min-load-choices")
	if c.disablePressureGuard || c.pressureAbsTokens != nil || c.pressureAbsMS != nil || c.pressureRelThreshold != nil {
		g := p.child("pressure_guard")
		if c.disablePressureGuard {
			g.set("enabled", false, "--disable-pressure-guard")
		}
		setGiven(g, "abs_threshold_tokens", c.pressureAbsTokens, "--pressure-abs-threshold-tokens")
		setGiven(g, "abs_threshold_ms", c.pressureAbsMS, "--pressure-abs-threshold-ms")
		setGiven(g, "rel_threshold", c.pressureRelThreshold, "--pressure-rel-threshold")
	}
	from := "--policy cache_aware"
	if c.cachePrefixProvider != nil {
		from = "--cache-prefix-provider radix_tree"
	}
	if t.in.EnginesPublishKVEvents {
		p.child("prefix_source").set("type", "local_index", from+" with --engines-publish-kv-events: fed by the engines' KV events")
	} else {
		src := p.child("prefix_source")
		src.set("type", "approximate", from+": learned from the router's dispatches, as sgl-router's radix tree")
		src.set("speculative_ttl_ms", speculativeTTLMS, "sgl-router inserted each request into its tree as it picked it, so a burst follows the first pick")
		setGiven(src, "ttl_secs", c.smg.cacheTTLSecs, "--cache-ttl-secs")
		setGiven(src, "block_size", c.smg.blockSize, "--block-size")
	}
}

// decodeSelection is the policy of a decode group: --decode-policy, whose only remaining
// value is power_of_two, with the capacity check sgl-router made before every decode pick.
func (t *translator) decodeSelection() *node {
	p := &node{}
	from := "sgl-router's default --decode-policy"
	switch {
	case t.c.decodePolicy != nil:
		from = "--decode-policy " + *t.c.decodePolicy
	case t.c.decodeFallbackReplaced():
		from = "the classic router's decode selection fell back to cache_aware, which a decode group does not take: see the header"
	case t.c.dialect == DialectClassic:
		from = "--policy " + *t.c.policy + ", which the classic router's decode selection falls back to"
	}
	typ := t.c.decodePolicyType()
	p.set("type", typ, from)
	if t.c.dialect != DialectClassic {
		setAdmission(p, t.capacityCaps())
	}
	setAdmission(p, t.c.smgCaps(stageDecode))
	switch typ {
	case "cache_aware":
		t.cacheTuning(p)
	case "sticky":
		t.c.smgSticky(p, t.c.legacyDecodePolicy())
	}
	return p
}

// implicitBucket is the one bucket sgl-router routes with when no --bucket-config is
// given: every worker of each role, no length bounds. It keeps sgl-router's name for it.
func (t *translator) implicitBucket() *node {
	b := &node{}
	b.set("id", "global", "sgl-router's name for that bucket")
	groups := b.child("groups")
	if t.c.pdMode() {
		pd := groups.child("pd")
		pd.set("prefill", group(nil, "", t.selectionPolicy(nil)), "")
		pd.set("decode", group(nil, "", t.decodeSelection()), "")
	} else {
		groups.set("plain", group(nil, "", t.selectionPolicy(nil)), "")
	}
	return b
}
