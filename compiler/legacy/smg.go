package legacy

import "strconv"

// SMG (the SGLang Model Gateway, now the Shepherd Model Gateway: smg-project/smg
// model_gateway/src/main.rs and bindings/python/src/smg/router_args.py at f8daa8835) is the
// classic router grown on: the same flags and defaults, and many more. They are read in the
// classic dialect. The ones with a router setting are mapped; every other one is refused by
// name with why and what to use, grouped below by what it configures.

// smgArgs are the SMG flags the configuration has a setting for.
type smgArgs struct {
	assignmentMode     *string  // --assignment-mode, manual's choice for a new key
	maxIdleSecs        *int64   // --max-idle-secs, manual's key idle expiry
	evictionSecs       *int64   // --eviction-interval[-secs]: manual's sweep, or cache_aware's trim
	routingKeyHeaders  []string // --routing-key-headers
	cacheTTLSecs       *int64   // --cache-ttl-secs
	blockSize          *int64   // --block-size
	prefillMaxInflight *int64   // --prefill-max-inflight-requests-per-worker (-1: off)
	prefillQueueSize   *int64
	prefillQueueSecs   *int64
	overloadWaiting    *int64 // --worker-overload-waiting-requests
	shutdownGraceSecs  *int64 // --shutdown-grace-period-secs

	healthFailures, healthSuccesses       *int64
	healthTimeoutSecs, healthIntervalSecs *int64
	healthEndpoint                        *string
}

// SMG's manual policy defaults (main.rs: --max-idle-secs 14400, --assignment-mode random).
const smgMaxIdleSecs = 14400

// smgRoutingKeyHeader is the header SMG's manual and consistent_hashing policies read the
// routing key from (policies/manual.rs, consistent_hashing.rs; --routing-key-headers).
const smgRoutingKeyHeader = "x-smg-routing-key"

// assignmentFallbacks maps --assignment-mode to the sticky fallback that assigns a new key
// the same way; min_group and delegate have none.
var assignmentFallbacks = map[string]string{"random": "random", "min_load": "load_based"}

// Why groups of SMG flags cannot be migrated, each naming what does the job here.
const (
	whyEncode     = "encode workers (EPD disaggregation: the router routes prefill and decode engines, not a vision encoder stage)"
	whyMultimodal = "multimodal tensor transport between the router and gRPC workers (the router forwards requests over HTTP as they are)"
	whyTenants    = "tenants, priority classes and per-tenant limits (clients are not told apart beyond their API key; limits and the queue are per router and model)"
	whyStorage    = "conversation and response storage (the router keeps no history: it forwards /v1 requests to engines)"
	whyControl    = "control-plane authentication by JWT or per-role keys (the admin API has its own bearer token, admin_token; client keys are auth.api_keys)"
	whyMesh       = "the HA mesh of router replicas (replicas share no routing state but session bindings, through a shared bindings store)"
	whyUpstream   = "upstream connection and streaming tuning (the router's transport to engines is fixed: HTTP/1.1 with keep-alive, streamed both ways)"
	whyRuntime    = "the gateway's own runtime, job queue and WebRTC (not part of the router)"
	whyTokCache   = "tokenizer loading and caching (the router loads tokenizer.path once and caches prefix hashes per request)"
	whyLoad       = "the load monitor's cadence (each engine's load is polled every engines[].load.interval_ms)"
	whyHealth     = "health-check and worker-registry tuning (engines are health-checked and circuit-broken as breaker.* says; a failing engine is skipped, never removed)"
	whyDPMin      = "data-parallel rank scheduling (each engine is one URL; its ranks are reported in its load, not addressed)"
)

// smgFlags are SMG's flags beyond the classic router's, bound to the fields of c.
func (c *cli) smgFlags() []flagSpec {
	s := &c.smg
	return []flagSpec{
		// Policy tuning with a router setting.
		{name: "--assignment-mode", arity: oneValue, set: text(&s.assignmentMode)},
		{name: "--max-idle-secs", aliases: []string{"--sticky-key-idle-secs"}, arity: oneValue, set: count(&s.maxIdleSecs)},
		{name: "--routing-key-headers", arity: someValues, repeat: true, set: texts(&s.routingKeyHeaders)},
		{name: "--cache-ttl-secs", arity: oneValue, set: count(&s.cacheTTLSecs)},
		{name: "--block-size", arity: oneValue, set: count(&s.blockSize)},
		{name: "--prefill-max-inflight-requests-per-worker", arity: oneValue, set: signed(&s.prefillMaxInflight)},
		{name: "--prefill-queue-size", arity: oneValue, set: count(&s.prefillQueueSize)},
		{name: "--prefill-queue-timeout-secs", arity: oneValue, set: count(&s.prefillQueueSecs)},
		{name: "--worker-overload-waiting-requests", arity: oneValue, set: count(&s.overloadWaiting)},
		{name: "--shutdown-grace-period-secs", arity: oneValue, set: count(&s.shutdownGraceSecs)},

		// Policy tuning without one.
		{name: "--routing-key-override", aliases: []string{"--sticky-sessions"}, arity: switchFlag, refuse: refuseWith("the router reads a routing key only under --policy sticky (SMG's manual and consistent_hashing), from one header, never from the body's rid: remove it, and use --policy manual for key-pinned routing")},
		{name: "--balance-token-usage-threshold", arity: oneValue, refuse: refuseBalance},
		{name: "--overload-token-usage-threshold", arity: oneValue, refuse: refuseBalance},
		{name: "--overlap-decay", arity: oneValue, refuse: refuseWith("the router's cache_aware ranks prefix holders by matched tokens and moves off a busy one with its pressure guard (policy.pressure_guard), not by a decayed overlap score: remove it")},
		{name: "--selection-temperature", arity: oneValue, refuse: refuseWith("the router's cache_aware picks the best-matching admissible holder, never by softmax sampling: remove it")},
		{name: "--cache-boundaries", arity: someValues, repeat: true, refuse: refuseWith("the prefix index matches every block of prefix_source.block_size tokens, not hashes at chosen boundaries: remove it")},
		{name: "--cache-index", arity: oneValue, refuse: refuseWith("the router's prefix index is a block index (prefix_source.type approximate, or local_index fed by KV events); there is no tree/hash choice: remove it")},
		{name: "--kv-indexer-ttl-secs", arity: oneValue, refuse: refuseWith("it tunes SMG's event-fed index; the router's local_index holds what the engines' KV events say is cached, bounded per engine by kv_events.max_blocks: remove it")},
		{name: "--kv-indexer-max-entries", arity: oneValue, refuse: refuseWith("it bounds SMG's event-fed index; the router bounds its local_index per engine with kv_events.max_blocks: remove it, and set that by hand")},
		{name: "--prefix-token-count", arity: oneValue, refuse: refusePrefixHash},
		{name: "--prefix-hash-load-factor", arity: oneValue, refuse: refusePrefixHash},
		{name: "--prefix-hash-balance-abs-threshold", arity: oneValue, refuse: refusePrefixHash},
		{name: "--least-load-kv-pressure-weight", arity: oneValue, refuse: refuseLeastLoad},
		{name: "--least-load-default-throughput", arity: oneValue, refuse: refuseLeastLoad},
		{name: "--least-load-mean-prefill-tokens", arity: oneValue, refuse: refuseLeastLoad},
		{name: "--least-load-max-waiting-requests", arity: oneValue, refuse: refuseLeastLoad},
		{name: "--bucket-adjust-interval-secs", arity: oneValue, refuse: refuseWith("it tunes --policy bucket, which cannot be migrated (the router's buckets are static length ranges): remove it")},
		{name: "--worker-overload-protection", arity: switchFlag, refuse: refuseKVUsage},
		{name: "--worker-overload-token-usage", arity: oneValue, refuse: refuseKVUsage},
		{name: "--dp-minimum-tokens-scheduler", arity: switchFlag, unsupported: whyDPMin},

		// Encode workers and multimodal transport.
		{name: "--epd-disaggregation", arity: switchFlag, unsupported: whyEncode},
		{name: "--encode", arity: prefillValues, repeat: true, unsupported: whyEncode},
		{name: "--encode-policy", arity: oneValue, unsupported: whyEncode},
		{name: "--encode-selector", arity: someValues, repeat: true, unsupported: whyEncode},
		{name: "--multimodal-tensor-transport", arity: oneValue, unsupported: whyMultimodal},
		{name: "--multimodal-shm-min-bytes", arity: oneValue, unsupported: whyMultimodal},

		// Discovery extras.
		{name: "--router-selector", arity: someValues, repeat: true, unsupported: whyMesh},
		{name: "--model-id-from", arity: oneValue, unsupported: "model names from pod metadata (engines_from_dns gives every engine of a name one model)"},
		{name: "--model-alias", arity: someValues, repeat: true, unsupported: "model aliases (each model is served under its one name in models)"},

		// Logging and metrics.
		{name: "--log-json", arity: switchFlag, refuse: refuseWith("logging is not part of the router configuration: pass --log-format json to `router serve` instead")},
		{name: "--prometheus-duration-buckets", arity: someValues, unsupported: "custom histogram buckets (the router's latency histograms have fixed buckets)"},

		// Health checks, startup and the worker registry.
		{name: "--health-check-port", arity: oneValue, refuse: refuseWith("the router serves /health and /readyz on its listen address (and /metrics on metrics.listen when set), not on a probe-only port: remove it and point the probes at the listen address")},
		{name: "--disable-health-check", arity: switchFlag, unsupported: whyHealth},
		{name: "--remove-unhealthy-workers", aliases: []string{"--worker-auto-recovery"}, arity: switchFlag, unsupported: whyHealth},
		{name: "--drain-settle-secs", arity: oneValue, unsupported: whyHealth},
		{name: "--worker-startup-delay", arity: oneValue, unsupported: "waiting for workers at startup (the router starts at once and health-checks engines as it runs)"},
		{name: "--load-monitor-interval", arity: oneValue, unsupported: whyLoad},
		{name: "--disable-load-monitoring", arity: switchFlag, unsupported: whyLoad},
		{name: "--engine-metrics", arity: switchFlag, unsupported: "re-exporting engine load as Prometheus gauges"},

		// Tenants and priority scheduling.
		{name: "--storage-context-headers", arity: someValues, unsupported: whyStorage},
		{name: "--trust-tenant-header", arity: switchFlag, unsupported: whyTenants},
		{name: "--tenant-header-name", arity: oneValue, unsupported: whyTenants},
		{name: "--tenant-api-key", arity: someValues, repeat: true, unsupported: whyTenants},
		{name: "--priority-scheduler-enabled", arity: switchFlag, unsupported: whyTenants},
		{name: "--priority-scheduler-default-max-class", arity: oneValue, unsupported: whyTenants},
		{name: "--priority-scheduler-config", arity: oneValue, unsupported: whyTenants},
		{name: "--priority-scheduler-tenant-metric-top-n", arity: oneValue, unsupported: whyTenants},
		{name: "--tenant-rate-limit-enabled", arity: switchFlag, unsupported: whyTenants},
		{name: "--tenant-rate-limit-config", arity: oneValue, unsupported: whyTenants},

		// Upstream transport and the gateway's runtime.
		{name: "--upstream-http2", arity: switchFlag, unsupported: whyUpstream},
		{name: "--upstream-pool-idle-timeout-secs", arity: oneValue, unsupported: whyUpstream},
		{name: "--stream-request-bodies-over", arity: oneValue, unsupported: whyUpstream},
		{name: "--stream-body-stall-timeout-secs", arity: oneValue, unsupported: whyUpstream},
		{name: "--job-queue-capacity", arity: oneValue, unsupported: whyRuntime},
		{name: "--job-queue-concurrency", arity: oneValue, unsupported: whyRuntime},
		{name: "--zmq-engine-count", arity: oneValue, unsupported: whyRuntime},
		{name: "--runtime-worker-threads", arity: oneValue, unsupported: whyRuntime},
		{name: "--webrtc-bind-addr", arity: oneValue, unsupported: whyRuntime},
		{name: "--webrtc-stun-server", arity: oneValue, unsupported: whyRuntime},
		{name: "--router-disable-arg-fallback", arity: switchFlag, refuse: refuseWith("it tells sglang_router.launch_server which --router-* flags to read; launch_server lines are not migrated (split the router part out as a launch_router line): remove it")},

		// Tokenizer loading and caching, parsers, storage backends.
		{name: "--disable-tokenizer-autoload", arity: switchFlag, unsupported: whyTokCache},
		{name: "--tokenizer-cache-enable-l0", arity: switchFlag, unsupported: whyTokCache},
		{name: "--tokenizer-cache-l0-max-entries", arity: oneValue, unsupported: whyTokCache},
		{name: "--tokenizer-cache-enable-l1", arity: switchFlag, unsupported: whyTokCache},
		{name: "--tokenizer-cache-l1-max-memory", arity: oneValue, unsupported: whyTokCache},
		{name: "--mcp-config-path", arity: oneValue, unsupported: "MCP tool servers (the router forwards the engines' answers as they are)"},
		{name: "--enable-wasm", arity: switchFlag, unsupported: "WebAssembly middleware"},
		{name: "--storage-hook-wasm-path", arity: oneValue, unsupported: whyStorage},
		{name: "--schema-config", arity: oneValue, unsupported: whyStorage},
		{name: "--oracle-wallet-path", arity: oneValue, unsupported: whyStorage},
		{name: "--oracle-tns-alias", arity: oneValue, unsupported: whyStorage},
		{name: "--oracle-dsn", aliases: []string{"--oracle-connect-descriptor"}, arity: oneValue, unsupported: whyStorage},
		{name: "--oracle-user", aliases: []string{"--oracle-username"}, arity: oneValue, unsupported: whyStorage},
		{name: "--oracle-password", arity: oneValue, unsupported: whyStorage},
		{name: "--oracle-external-auth", arity: switchFlag, unsupported: whyStorage},
		{name: "--oracle-pool-min", arity: oneValue, unsupported: whyStorage},
		{name: "--oracle-pool-max", arity: oneValue, unsupported: whyStorage},
		{name: "--oracle-pool-timeout-secs", arity: oneValue, unsupported: whyStorage},
		{name: "--postgres-db-url", arity: oneValue, unsupported: whyStorage},
		{name: "--postgres-pool-max-size", aliases: []string{"--postgres-pool-max"}, arity: oneValue, unsupported: whyStorage},
		{name: "--redis-url", arity: oneValue, unsupported: whyStorage},
		{name: "--redis-pool-max-size", aliases: []string{"--redis-pool-max"}, arity: oneValue, unsupported: whyStorage},
		{name: "--redis-retention-days", arity: oneValue, unsupported: whyStorage},

		// Control-plane authentication and the mesh.
		{name: "--jwt-issuer", arity: oneValue, unsupported: whyControl},
		{name: "--jwt-audience", arity: oneValue, unsupported: whyControl},
		{name: "--jwt-jwks-uri", arity: oneValue, unsupported: whyControl},
		{name: "--jwt-role-claim", arity: oneValue, unsupported: whyControl},
		{name: "--jwt-role-mapping", arity: someValues, repeat: true, unsupported: whyControl},
		{name: "--control-plane-api-keys", arity: someValues, repeat: true, unsupported: whyControl},
		{name: "--disable-audit-logging", arity: switchFlag, unsupported: whyControl},
		{name: "--control-plane-audit-enabled", arity: switchFlag, unsupported: whyControl},
		{name: "--enable-mesh", arity: switchFlag, unsupported: whyMesh},
		{name: "--mesh-server-name", arity: oneValue, unsupported: whyMesh},
		{name: "--mesh-host", arity: oneValue, unsupported: whyMesh},
		{name: "--mesh-advertise-host", arity: oneValue, unsupported: whyMesh},
		{name: "--mesh-port", arity: oneValue, unsupported: whyMesh},
		{name: "--mesh-peer-urls", arity: someValues, unsupported: whyMesh},
	}
}

// refusePrefixHash explains the prefix_hash tuning flags.
func refusePrefixHash(flag string, _ []string) string {
	return flag + " cannot be migrated: it tunes --policy prefix_hash, which cannot be migrated (the router does not hash prompt heads onto a ring; --policy cache_aware follows prompts to the engines that hold their prefixes): remove it"
}

// refuseLeastLoad explains the least_load tuning flags.
func refuseLeastLoad(flag string, _ []string) string {
	return flag + " cannot be migrated: --policy least_load becomes load_based, which picks the engine with the least reported load (running and waiting requests) and has no estimate of in-flight work to tune: remove it"
}

// refuseKVUsage explains SMG's KV-usage overload exclusion, a fraction of each engine's cache.
func refuseKVUsage(flag string, _ []string) string {
	return flag + " cannot be migrated: it excluded a worker above a fraction of its KV cache in use, while the router's admission cap is in tokens (admission.max_kv_tokens): remove it, and set max_kv_tokens to that fraction of your engines' max_total_num_tokens by hand"
}

// smgRules checks the SMG flags that map, as SMG did, against the policies they tune.
func (c *cli) smgRules(p *Errors) {
	s := &c.smg
	manual := c.legacyPolicy() == "manual" || c.pdMode() && c.legacyDecodePolicy() == "manual"
	keyed := manual || c.legacyPolicy() == "consistent_hashing" || c.pdMode() && c.legacyDecodePolicy() == "consistent_hashing"
	p.check(s.assignmentMode == nil || manual, "--assignment-mode tunes --policy manual, and the command line has --policy %s: remove it", c.legacyPolicy())
	p.check(s.maxIdleSecs == nil || manual, "--max-idle-secs tunes --policy manual, and the command line has --policy %s: remove it", c.legacyPolicy())
	if m := s.assignmentMode; m != nil && manual {
		_, ok := assignmentFallbacks[*m]
		p.check(ok, "--assignment-mode %s cannot be migrated: a new routing key is assigned by the sticky policy's fallback (random, load_based, ...), and there is none that %s; use --assignment-mode random or min_load", *m,
			map[string]string{"min_group": "balances keys over groups of workers", "delegate": "delegates to another policy"}[*m])
	}
	if n := s.maxIdleSecs; n != nil {
		p.check(*n > 0, "--max-idle-secs must be greater than 0 (sticky_idle_secs is positive)")
	}
	if s.evictionSecs != nil && !manual {
		p.addf("%s", refuseEvictionInterval(c.evictionFlag(), nil))
	}
	if s.evictionSecs != nil && manual {
		p.check(*s.evictionSecs > 0, "%s must be greater than 0 (sticky_eviction_interval_secs is positive)", c.evictionFlag())
	}
	p.check(len(s.routingKeyHeaders) == 0 || keyed, "--routing-key-headers names where --policy manual and consistent_hashing read the routing key, and the command line has --policy %s: remove it", c.legacyPolicy())
	p.check(len(s.routingKeyHeaders) <= 1, "--routing-key-headers %v cannot be migrated: the router reads the routing key from one header (models.M.routing_key_header): give one", s.routingKeyHeaders)
	for _, h := range s.routingKeyHeaders {
		p.check(validHeaderName(h), "--routing-key-headers %q is not a valid HTTP header name", h)
	}
	cached := c.usesCacheAware()
	p.check(s.cacheTTLSecs == nil || cached, "--cache-ttl-secs tunes --policy cache_aware: remove it")
	p.check(s.cacheTTLSecs == nil || !c.kvEvents, "--cache-ttl-secs sets how long the approximate prefix index keeps an entry; with --engines-publish-kv-events the index holds what the engines report: remove it")
	p.check(s.blockSize == nil || cached, "--block-size tunes --policy cache_aware: remove it")
	p.check(s.blockSize == nil || !c.kvEvents, "--block-size with --engines-publish-kv-events cannot be migrated: the event-fed index takes each engine's page size from its kv_events.block_size; set it there by hand and remove the flag")
	if n := s.blockSize; n != nil {
		p.check(*n > 0, "--block-size must be greater than 0")
	}
	if n := s.shutdownGraceSecs; n != nil {
		p.check(*n >= 1 && *n <= 1800, "--shutdown-grace-period-secs %d cannot be migrated: shutdown_grace_secs holds 1 to 1800 s", *n)
	}
	if n := s.overloadWaiting; n != nil {
		p.check(*n >= 1, "--worker-overload-waiting-requests must be at least 1 (SMG: 0 would veto every worker)")
	}
	p.check(c.perWorkerCap == nil || c.maxInFlight == nil, "--max-concurrent-requests-per-worker and --max-in-flight both cap each worker's in-flight requests: give one")
	if n := c.perWorkerCap; n != nil {
		p.check(*n > 0, "--max-concurrent-requests-per-worker must be greater than 0")
	}
	c.prefillAdmissionRules(p)
}

// evictionFlag is the spelling of the eviction interval the line used.
func (c *cli) evictionFlag() string {
	if c.evictionSpelling != "" {
		return c.evictionSpelling
	}
	return "--eviction-interval"
}

// prefillAdmissionRules checks SMG's per-worker prefill admission (lightseekorg/smg
// 868f3264a, validation.rs): a positive cap in PD mode; its queue only with a cap, and not
// with the gateway queue flags, which would set the same queue twice.
func (c *cli) prefillAdmissionRules(p *Errors) {
	s := &c.smg
	capped := s.prefillMaxInflight != nil && *s.prefillMaxInflight > 0
	p.check(s.prefillMaxInflight == nil || c.pdMode(), "--prefill-max-inflight-requests-per-worker caps prefill workers, and the command line has none (PD mode: --pd-disaggregation with --prefill and --decode): remove it")
	p.check(capped || s.prefillQueueSize == nil && s.prefillQueueSecs == nil, "--prefill-queue-size and --prefill-queue-timeout-secs need --prefill-max-inflight-requests-per-worker N, N > 0 (SMG rejects them without it)")
	p.check(!capped || c.gateway.maxConcurrent == nil || !c.gateway.limited(), "--prefill-max-inflight-requests-per-worker and --max-concurrent-requests both queue requests; the router has one queue per model: give one of them")
	if s.prefillQueueSecs != nil {
		p.check(*s.prefillQueueSecs >= 1, "--prefill-queue-timeout-secs must be at least 1: the queue's timeout_ms is positive (use --prefill-queue-size 0 to answer at once)")
	}
}

// prefillAdmission sets SMG's prefill admission: the cap on the prefill group, and the queue
// that holds requests while every prefill engine is at it.
func (t *translator) prefillAdmission(root *node) {
	s := &t.c.smg
	if s.prefillMaxInflight == nil || *s.prefillMaxInflight <= 0 {
		return
	}
	setQueue(root, s.prefillQueueSize, "--prefill-queue-size", "SMG's default --prefill-queue-size 100 with --prefill-max-inflight-requests-per-worker",
		s.prefillQueueSecs, "--prefill-queue-timeout-secs", "SMG's default --prefill-queue-timeout-secs 60")
}

// smgCaps are the admission caps SMG's flags put on a group of role ("plain", "prefill" or
// "decode").
func (c *cli) smgCaps(role string) []admissionCap {
	s := &c.smg
	var caps []admissionCap
	if n := s.prefillMaxInflight; n != nil && *n > 0 && role == stagePrefill {
		caps = append(caps, admissionCap{"max_inflight_requests", *n, "--prefill-max-inflight-requests-per-worker"})
	}
	if n := s.overloadWaiting; n != nil {
		caps = append(caps, admissionCap{"max_waiting_requests", *n, "--worker-overload-waiting-requests: SMG skipped a worker with that many waiting"})
	}
	return caps
}

// smgSticky sets what SMG's manual or consistent_hashing policy (legacy) becomes on the sticky
// policy p: the fallback that assigns a new or missing key.
func (c *cli) smgSticky(p *node, legacy string) {
	switch legacy {
	case "consistent_hashing":
		p.set("fallback", "random", "--policy consistent_hashing: a request without a routing key went to a random worker")
	case "manual":
		mode, from := "random", "--policy manual with SMG's default --assignment-mode random"
		if c.smg.assignmentMode != nil {
			mode, from = *c.smg.assignmentMode, "--assignment-mode "+*c.smg.assignmentMode
		}
		p.set("fallback", assignmentFallbacks[mode], from)
	}
}

// smgModel sets the model settings of SMG's key-pinned policies.
func (t *translator) smgModel(model *node) {
	c := t.c
	policies := []string{c.legacyPolicy()}
	if c.pdMode() {
		policies = append(policies, c.legacyDecodePolicy())
	}
	var manual, keyed bool
	for _, p := range policies {
		manual = manual || p == "manual"
		keyed = keyed || p == "manual" || p == "consistent_hashing"
	}
	if !keyed {
		return
	}
	header, from := smgRoutingKeyHeader, "SMG's routing-key header, X-SMG-Routing-Key"
	if len(c.smg.routingKeyHeaders) == 1 {
		header, from = c.smg.routingKeyHeaders[0], "--routing-key-headers"
	}
	model.set("routing_key_header", header, from)
	if manual {
		n, from := int64(smgMaxIdleSecs), "SMG's default --max-idle-secs 14400 for --policy manual"
		if c.smg.maxIdleSecs != nil {
			n, from = *c.smg.maxIdleSecs, "--max-idle-secs"
		}
		model.set("sticky_idle_secs", n, from)
		setGiven(model, "sticky_eviction_interval_secs", c.smg.evictionSecs, c.evictionFlag()+": manual's expiry sweep")
	}
}

// smgNotes say how SMG's policies and flags behave differently here.
func smgNotes(c *cli) []string {
	var out []string
	legacy := map[string]bool{c.legacyPolicy(): true}
	if c.pdMode() {
		legacy[c.legacyDecodePolicy()] = true
	}
	if legacy["consistent_hashing"] {
		out = append(out, "--policy consistent_hashing placed each routing key on a hash ring of the workers, so a key kept its worker across router restarts and only a 1/N share of keys moved when workers changed; sticky binds a key to the engine its fallback picks on first sight and keeps it while the key is used (sticky_idle_secs, 600 s idle), rebinding after a restart. The X-SMG-Target-Worker header is not read.")
	}
	if legacy["manual"] {
		out = append(out, "--policy manual kept up to two candidate workers per routing key; sticky keeps one and rebinds the key through its fallback when that engine is unhealthy.")
	}
	if legacy["least_load"] {
		out = append(out, "--policy least_load estimated each worker's in-flight work from its KV pressure and throughput; load_based picks the engine with the least reported load (running and waiting requests).")
	}
	if n := c.smg.prefillMaxInflight; n != nil && *n > 0 {
		out = append(out, "SMG answered a full prefill queue and a timed-out wait with 429 (pd_prefill_queue_full, pd_prefill_queue_timeout); the router answers a full queue 429 with Retry-After and a timed-out wait as its queue does. The queue is per model here, router-wide in SMG.")
	}
	return append(out, gatewayNotes(c)...)
}

// shutdownGrace sets the drain SMG's --shutdown-grace-period-secs asked for.
func (t *translator) shutdownGrace(root *node) {
	if n := t.c.smg.shutdownGraceSecs; n != nil {
		root.set("shutdown_grace_secs", *n, "--shutdown-grace-period-secs "+strconv.FormatInt(*n, 10))
	}
}

// evictionSetter stores --eviction-interval[-secs], remembering the spelling for messages.
func (c *cli) evictionSetter(flag string, vs []string) error {
	c.evictionSpelling = flag
	return count(&c.smg.evictionSecs)(flag, vs)
}

// health sets the health checks the command line tunes. Absent flags keep the router's
// checks (every 1 s, 1 s timeout), which find a dead engine sooner than SMG's 60 s.
func (t *translator) health(root *node) {
	s := &t.c.smg
	if s.healthFailures == nil && s.healthSuccesses == nil && s.healthTimeoutSecs == nil && s.healthIntervalSecs == nil {
		return
	}
	h := root.child("health")
	if n := s.healthIntervalSecs; n != nil {
		h.set("interval_ms", *n*1000, "--health-check-interval-secs")
	}
	if n := s.healthTimeoutSecs; n != nil {
		h.set("timeout_ms", *n*1000, "--health-check-timeout-secs")
	}
	setGiven(h, "failure_threshold", s.healthFailures, "--health-failure-threshold")
	setGiven(h, "success_threshold", s.healthSuccesses, "--health-success-threshold")
}

// healthRules checks the health-check flags against what the configuration holds.
func (c *cli) healthRules(p *Errors) {
	s := &c.smg
	for _, f := range []struct {
		flag string
		n    *int64
	}{{"--health-failure-threshold", s.healthFailures}, {"--health-success-threshold", s.healthSuccesses}} {
		if f.n != nil {
			p.check(*f.n > 0, "%s must be greater than 0", f.flag)
		}
	}
	for _, f := range []struct {
		flag string
		n    *int64
	}{{"--health-check-timeout-secs", s.healthTimeoutSecs}, {"--health-check-interval-secs", s.healthIntervalSecs}} {
		if f.n != nil {
			p.check(*f.n >= 1 && *f.n <= 86400, "%s %d cannot be migrated: health checks take 1 s to a day (86400 s)", f.flag, *f.n)
		}
	}
	if e := s.healthEndpoint; e != nil {
		p.check(*e == "/health", "--health-check-endpoint %s cannot be migrated: the router checks GET /health on every engine, which SGLang and vLLM serve: remove it", *e)
	}
}
