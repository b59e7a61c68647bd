package legacy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/routerkit/router/compiler"
)

// cli is a parsed sgl-router command line (the era-3 grouped CLI of
// reference/sglang-router.md §1.3). An optional flag that was not given is nil, so that
// the migration can tell sgl-router's defaults from the operator's choices.
type cli struct {
	modelID      *string
	host         *string
	port         *int64
	bucketConfig *string

	// Workers. --worker-urls is sgl-router's static list; --prefill and --decode come from
	// the classic router's PD mode, because a migration cannot ask workers for their role.
	workerURLs []string
	prefill    []prefillWorker
	decode     []string

	policy       *string
	decodePolicy *string
	filters      []string
	maxInFlight  *int64
	perWorkerCap *int64 // --max-concurrent-requests-per-worker

	cachePrefixProvider  *string
	minMatchedTokens     *int64
	minMatchRatio        *float64
	candidateMinWorkers  *int64
	candidateRatio       *float64
	candidateMaxWorkers  *int64
	switchMarginTokens   *int64
	workerQueueLimit     *int64
	saturationQueueFloor *int64
	minLoadChoices       *int64
	cacheThreshold       *float64 // the classic router's ratio gate, see classic.go

	sessionIDHeader      *string
	sessionIdleSecs      *int64
	sessionEvictionSecs  *int64
	affinityMode         *string
	sessionAffinityMode  *string
	routingKeyHeader     *string
	stickyFallback       *string
	stickyIdleSecs       *int64
	stickyEvictionSecs   *int64
	disablePressureGuard bool
	pressureAbsTokens    *int64
	pressureAbsMS        *float64
	pressureRelThreshold *float64

	// The dialect read, and what the classic router or era 4 add (dialect.go).
	dialect            Dialect
	dialectFrom        string // why that dialect (detect)
	program            string // the program name stripped from the command line, if any
	pdDisaggregation   bool
	prefillPolicy      *string
	modelPath          *string
	tokenizerPath      *string
	chatTemplate       *string
	requestTimeoutSecs *int64
	streamIdleSecs     *int64 // era 4's --stream-idle-timeout-secs
	shutdownDrainSecs  *int64 // --shutdown-drain-secs
	disableRetries     bool
	cbFailures         *int64
	cbOpenSecs         *int64
	cbThreshold        *int64
	cbCoolDownSecs     *int64
	chatRouting        *string
	powerOfNChoices    *int64

	// SMG's flags and the gateway's (smg.go, gateway.go), Kubernetes discovery
	// (discovery.go); evictionSpelling is how --eviction-interval[-secs] was spelled.
	smg              smgArgs
	gateway          gatewayArgs
	discovery        discoveryArgs
	evictionSpelling string
	// kvEvents is router migrate's --engines-publish-kv-events.
	kvEvents bool

	// model is the served model's name and modelFrom where it came from (resolveModel).
	model, modelFrom string

	// duplicates describes the worker URLs listed more than once, which sgl-router
	// de-duplicated and so does the migration.
	duplicates []string
}

// prefillWorker is one --prefill URL [BOOTSTRAP_PORT|none]; a nil port is "none" or absent.
type prefillWorker struct {
	url  string
	port *int64
	arg  string // the port as given: a number, "none" or empty
}

// sgl-router's value sets. Dropped values are not listed: they have messages of their own.
var (
	policies             = []string{"round_robin", "random", "power_of_two", "load_based", "session_aware", "cache_aware", "sticky"}
	decodePolicies       = []string{"power_of_two"}
	filterKinds          = []string{"overloaded"}
	prefixProviders      = []string{"radix_tree", "indexer"}
	affinityModes        = []string{"strict"}
	sessionAffinityModes = []string{"bucket", "global-rebind", "global-preserve"}
	stickyFallbacks      = []string{"round_robin", "random", "power_of_two", "load_based"}
)

// flagVocabulary spells the replacements of dropped options as sgl-router flags.
var flagVocabulary = compiler.Vocabulary{
	CacheAwareHitGate: "use --policy cache_aware with --cache-affinity-min-matched-tokens or --cache-affinity-min-match-ratio",
	DecodePowerOfTwo:  "remove it: --decode-policy defaults to power_of_two",
}

// What the router configuration has no setting for, named for the flags that set it.
const (
	breaker  = "the circuit breaker"
	sampling = "fleet sampling overrides"
)

// indexerWhy is why sgl-router's external KV indexer cannot be migrated.
const indexerWhy = "sgl-router's KV indexer (sgl-kv-indexer) speaks gRPC, but the router's remote_indexer prefix source speaks a JSON-over-HTTP protocol (POST {endpoint}/query, docs/config.md)"

// refuseIndexer explains why an indexer endpoint cannot be migrated, and how to keep
// cache-aware prefix matching without it.
func refuseIndexer(flag string, _ []string) string {
	return flag + " cannot be migrated: " + indexerWhy + ", so a grpc:// endpoint fails when `router serve` starts and an http:// one never answers, every lookup silently falling back to load. " +
		"Remove it, with --cache-prefix-provider indexer and the --kv-indexer-* flags, to use the router's approximate prefix index, learned from its own dispatches; " +
		"if the engines publish KV events, also pass --engines-publish-kv-events to router migrate for the local prefix index they feed, " +
		"and add kv_events: {endpoint: \"tcp://HOST:PORT\"} to each engine of the migrated configuration (migrate cannot know the engines' KV-event publishers); " +
		"or run an indexer that speaks the documented HTTP protocol and set prefix_source: {type: \"remote_indexer\", endpoint: \"http://HOST:PORT\"} by hand"
}

// refuseIndexerTuning explains a flag that tunes queries to the indexer; setting is the
// prefix_source field it would set.
func refuseIndexerTuning(setting string) func(string, []string) string {
	return func(flag string, _ []string) string {
		return fmt.Sprintf("%s cannot be migrated: it tunes queries to sgl-router's KV indexer, which speaks gRPC while the router's remote_indexer prefix source speaks JSON over HTTP (docs/config.md), so the indexer cannot be migrated: remove it; for an indexer that speaks the documented HTTP protocol, set prefix_source.%s by hand",
			flag, setting)
	}
}

// refuseLogging points a logging flag at `router serve`, which has the same flag.
func refuseLogging(values string) func(string, []string) string {
	return func(flag string, vs []string) string {
		return fmt.Sprintf("%s cannot be migrated: logging is not part of the router configuration, but `router serve` has the same flag: pass %s %s to `router serve` instead (it takes %s)",
			flag, flag, shellJoin(vs), values)
	}
}

// flags is the table of every flag of c's dialect that migrate knows, bound to the
// fields of c.
func (c *cli) flags() []flagSpec {
	if c.dialect == DialectClassic {
		return c.classicTable()
	}
	return c.experimentalTable()
}

// experimentalTable is the experimental sgl-router's grouped CLI, bound to the fields of c.
func (c *cli) experimentalTable() []flagSpec {
	dropped := func(d compiler.Dropped) *compiler.Dropped { return &d }
	return append(append([]flagSpec{
		// Model, tokenizer and sampling.
		{name: "--model-id", arity: oneValue, set: text(&c.modelID)},
		{name: "--tokenizer-path", arity: oneValue, set: text(&c.tokenizerPath)},
		{name: "--disable-input-ids-forwarding", arity: switchFlag, unsupported: "input_ids forwarding"},
		{name: "--override-sampling-params", arity: oneValue, unsupported: sampling},
		{name: "--sampling-param-conflict", arity: oneValue, unsupported: sampling},

		// Server, timeouts and logging.
		{name: "--host", arity: oneValue, set: text(&c.host)},
		{name: "--port", arity: oneValue, set: portNumber(&c.port)},
		{name: "--shutdown-drain-secs", arity: oneValue, set: count(&c.shutdownDrainSecs)},
		{name: "--termination-grace-secs", arity: oneValue, unsupported: "the startup check of the pod's termination grace period"},
		{name: "--request-timeout-secs", arity: oneValue, set: count(&c.requestTimeoutSecs)},
		{name: "--stream-idle-timeout-secs", arity: oneValue, set: count(&c.streamIdleSecs)},
		{name: "--stale-request-timeout-secs", arity: oneValue, unsupported: "the stale in-flight request janitor"},
		{name: "--log-level", arity: oneValue, refuse: refuseLogging("debug, info, warn or error")},
		{name: "--log-format", arity: oneValue, refuse: refuseLogging("text or json")},

		// Workers.
		{name: "--worker-urls", arity: someValues, repeat: true, set: texts(&c.workerURLs)},
		{name: "--prefill", arity: prefillValues, repeat: true, set: c.addPrefill},
		{name: "--decode", arity: oneValue, repeat: true, set: texts(&c.decode)},

		// Routing policies, admission and circuit breaker.
		{name: "--policy", arity: oneValue, set: powerOfN(oneOf(policies, map[string]compiler.Dropped{"fused_score": compiler.FusedScore, "score_policy": compiler.ScorePolicy}, text(&c.policy)))},
		{name: "--decode-policy", arity: oneValue, set: powerOfN(oneOf(decodePolicies, map[string]compiler.Dropped{"legacy_host_affinity": compiler.LegacyHostAffinity}, text(&c.decodePolicy)))},
		{name: "--bucket-config", arity: oneValue, set: text(&c.bucketConfig)},
		{name: "--fuse", arity: commaList, repeat: true, dropped: dropped(compiler.Fuse)},
		{name: "--filter", arity: commaList, repeat: true, set: oneOf(filterKinds, map[string]compiler.Dropped{"prefix_cache": compiler.PrefixCacheFilter}, texts(&c.filters))},
		{name: "--max-in-flight", arity: oneValue, set: count(&c.maxInFlight)},
		// The flat era-2 CLI's per-worker in-flight cap (reference/sglang-router.md §0 B.2).
		{name: "--max-concurrent-requests-per-worker", arity: oneValue, set: count(&c.perWorkerCap)},
		{name: "--prefix-cache-min-share", arity: oneValue, dropped: dropped(compiler.PrefixCacheMinShare)},
		{name: "--cb-threshold", arity: oneValue, set: count(&c.cbThreshold)},
		{name: "--cb-cool-down-secs", arity: oneValue, set: count(&c.cbCoolDownSecs)},
		{name: "--chat-routing", arity: oneValue, set: oneOf([]string{"legacy", "reorg"}, nil, text(&c.chatRouting))},
		{name: "--power-of-n-choices", arity: oneValue, set: count(&c.powerOfNChoices)},

		// Cache-aware routing.
		{name: "--cache-prefix-provider", arity: oneValue, set: c.setPrefixProvider},
		{name: "--kv-indexer-endpoint", arity: oneValue, refuse: refuseIndexer},
		{name: "--kv-indexer-query-timeout-ms", arity: oneValue, refuse: refuseIndexerTuning("query_timeout_ms")},
		{name: "--kv-indexer-query-max-inflight", arity: oneValue, refuse: refuseIndexerTuning("max_inflight_queries")},
		{name: "--cache-affinity-min-matched-tokens", arity: oneValue, set: count(&c.minMatchedTokens)},
		{name: "--cache-affinity-min-match-ratio", arity: oneValue, set: number(&c.minMatchRatio)},
		{name: "--cache-candidate-min-workers", arity: oneValue, set: count(&c.candidateMinWorkers)},
		{name: "--cache-candidate-ratio", arity: oneValue, set: number(&c.candidateRatio)},
		{name: "--cache-candidate-max-workers", arity: oneValue, set: count(&c.candidateMaxWorkers)},
		{name: "--cache-switch-margin-tokens", arity: oneValue, set: count(&c.switchMarginTokens)},
		{name: "--worker-queue-limit", arity: oneValue, set: count(&c.workerQueueLimit)},
		{name: "--saturation-queue-floor", arity: oneValue, set: count(&c.saturationQueueFloor)},
		{name: "--min-load-choices", arity: oneValue, set: count(&c.minLoadChoices)},
	}, slices.Concat(c.classicFlags(), c.discoveryFlags(false))...), []flagSpec{

		// Session affinity, sticky routing and pressure guards.
		{name: "--session-id-header", arity: oneValue, set: text(&c.sessionIDHeader)},
		{name: "--session-idle-secs", arity: oneValue, set: count(&c.sessionIdleSecs)},
		{name: "--session-eviction-interval-secs", arity: oneValue, set: count(&c.sessionEvictionSecs)},
		{name: "--stable-pair", arity: switchFlag, dropped: dropped(compiler.StablePair)},
		{name: "--affinity-mode", arity: oneValue, set: oneOf(affinityModes, map[string]compiler.Dropped{"soft": compiler.AffinityModeSoft}, text(&c.affinityMode))},
		{name: "--session-affinity-mode", arity: oneValue, set: oneOf(sessionAffinityModes, nil, text(&c.sessionAffinityMode))},
		{name: "--routing-key-header", arity: oneValue, set: text(&c.routingKeyHeader)},
		{name: "--sticky-fallback-policy", arity: oneValue, set: oneOf(stickyFallbacks, nil, text(&c.stickyFallback))},
		{name: "--sticky-idle-secs", arity: oneValue, set: count(&c.stickyIdleSecs)},
		{name: "--sticky-eviction-interval-secs", arity: oneValue, set: count(&c.stickyEvictionSecs)},
		{name: "--disable-pressure-guard", arity: switchFlag, set: switchOn(&c.disablePressureGuard)},
		{name: "--pressure-abs-threshold-tokens", arity: oneValue, set: count(&c.pressureAbsTokens)},
		{name: "--pressure-abs-threshold-ms", arity: oneValue, set: number(&c.pressureAbsMS)},
		{name: "--pressure-rel-threshold", arity: oneValue, set: number(&c.pressureRelThreshold)},
	}...)
}

// setPrefixProvider reads --cache-prefix-provider. Its indexer is sgl-router's gRPC KV
// indexer, which cannot be migrated.
func (c *cli) setPrefixProvider(flag string, vs []string) error {
	if vs[0] == "indexer" {
		return errors.New(refuseIndexer(flag+" indexer", vs))
	}
	return oneOf(prefixProviders, nil, text(&c.cachePrefixProvider))(flag, vs)
}

// addPrefill reads one --prefill URL [BOOTSTRAP_PORT|none].
func (c *cli) addPrefill(_ string, vs []string) error {
	w := prefillWorker{url: vs[0]}
	if len(vs) == 2 {
		w.arg = vs[1]
	}
	if len(vs) == 2 && vs[1] != "none" {
		n, err := strconv.ParseUint(vs[1], 10, 16)
		if err != nil || n == 0 {
			return fmt.Errorf("invalid bootstrap port %q for --prefill %s: give a port number (1-65535) or none", vs[1], vs[0])
		}
		p := int64(n)
		w.port = &p
	}
	c.prefill = append(c.prefill, w)
	return nil
}

// pdMode reports whether the command line lists prefill/decode workers.
func (c *cli) pdMode() bool {
	return len(c.prefill) > 0 || len(c.decode) > 0
}

// policyType is the router's policy of plain and prefill selection (legacyPolicy, as the
// router spells it).
func (c *cli) policyType() string {
	return routerPolicy(c.legacyPolicy())
}

// legacyPolicy is the legacy policy of plain and prefill selection, with the dialect's
// default: the classic router's cache_aware, the experimental router's round_robin, or
// power_of_n (the router's power_of_two) under --chat-routing reorg.
func (c *cli) legacyPolicy() string {
	switch {
	case c.prefillPolicy != nil && c.pdMode():
		return *c.prefillPolicy
	case c.policy != nil:
		return *c.policy
	case c.dialect == DialectClassic:
		return "cache_aware"
	case c.reorg():
		return "power_of_two"
	}
	return "round_robin"
}

// decodePolicyType is the router's policy of decode selection.
func (c *cli) decodePolicyType() string {
	return routerPolicy(c.legacyDecodePolicy())
}

// legacyDecodePolicy is the legacy policy of decode selection: the classic router's
// --decode-policy, falling back to --policy; the experimental router's power_of_two.
func (c *cli) legacyDecodePolicy() string {
	if c.dialect != DialectClassic {
		return "power_of_two"
	}
	if c.decodePolicy != nil {
		return *c.decodePolicy
	}
	if c.decodeFallbackReplaced() {
		return "power_of_two"
	}
	return *c.policy
}

// decodeFallbackReplaced reports whether the classic decode selection fell back to a
// cache_aware --policy (or its default), which the router's decode groups do not take:
// prefix reuse happens at prefill, so decode gets power_of_two and the header says so.
func (c *cli) decodeFallbackReplaced() bool {
	return c.dialect == DialectClassic && c.decodePolicy == nil && (c.policy == nil || *c.policy == "cache_aware")
}

// usesCacheAware reports whether prefill, plain or decode selection is cache_aware.
func (c *cli) usesCacheAware() bool {
	return c.policyType() == "cache_aware" || c.pdMode() && c.decodePolicyType() == "cache_aware"
}

// reorg reports whether the command line routes with era 4's bucket engine.
func (c *cli) reorg() bool {
	return c.chatRouting != nil && *c.chatRouting == "reorg"
}

// powerOfN reads era 4's spelling power_of_n as power_of_two, the same policy.
func powerOfN(set setter) setter {
	return func(flag string, vs []string) error {
		out := slices.Clone(vs)
		for i, v := range out {
			if v == "power_of_n" {
				out[i] = "power_of_two"
			}
		}
		return set(flag, out)
	}
}
