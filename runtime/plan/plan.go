// Package plan holds the compiled runtime plan: the effective configuration of a router
// after the compiler has validated it and filled in every default.
//
// The plan is plain data. It has no behaviour and no dependency on CUE, so the request
// path never evaluates configuration; `router compile` prints it as JSON, and `router
// serve` and `router explain` build their runtime objects from it.
package plan

import "fmt"

// Role is the stage an engine serves. The worker registry treats it as authoritative when
// groups filter their candidates.
type Role string

// Roles an engine can have. A model's engines are all plain or all prefill/decode.
const (
	RolePlain   Role = "plain"
	RolePrefill Role = "prefill"
	RoleDecode  Role = "decode"
)

// PolicyType names a selection policy.
type PolicyType string

// Policy types. LoadBased is the configuration name of the least-load policy.
const (
	RoundRobin   PolicyType = "round_robin"
	Random       PolicyType = "random"
	PowerOfTwo   PolicyType = "power_of_two"
	LoadBased    PolicyType = "load_based"
	SessionAware PolicyType = "session_aware"
	Sticky       PolicyType = "sticky"
	CacheAware   PolicyType = "cache_aware"
)

// Plan is a whole compiled router configuration.
type Plan struct {
	// Listen is the address `router serve` binds.
	Listen string `json:"listen"`
	// AdminToken, when set, is the bearer token the admin endpoints require.
	AdminToken string `json:"admin_token,omitempty"`
	Health     Health `json:"health"`
	// ShutdownGraceSecs bounds how long serve drains in-flight requests on shutdown.
	ShutdownGraceSecs int `json:"shutdown_grace_secs"`
	// ShutdownDelaySecs is how long serve keeps serving after SIGTERM with /readyz
	// answering 503, so that load balancers stop sending before the listener closes.
	ShutdownDelaySecs int `json:"shutdown_delay_secs"`
	// Readiness is when /readyz answers 200: ReadyAnyModel or ReadyEveryModel.
	Readiness string `json:"readiness"`
	// Engines lists every engine the router may dispatch to, in configuration order.
	Engines []Engine `json:"engines"`
	// EnginesFromDNS lists the DNS names whose records add engines at run time.
	EnginesFromDNS []DNSSource `json:"engines_from_dns,omitempty"`
	// Models lists the served models sorted by name.
	Models []Model `json:"models"`
	// Data-plane hardening: see resilience.go.
	Timeouts Timeouts     `json:"timeouts"`
	Limits   ServerLimits `json:"limits"`
	Breaker  Breaker      `json:"breaker"`
	Retries  Retries      `json:"retries"`
	Headers  HeaderPolicy `json:"headers"`
	State    StateLimits  `json:"state"`
	// Queue and RateLimit: what waits for capacity, and the rate limit (nil: none).
	Queue     Queue      `json:"queue"`
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// Bindings is the shared binding store; nil keeps bindings in the router's memory.
	Bindings *Bindings `json:"bindings,omitempty"`
	// EngineTransport says what speaks HTTP to engines; empty is TransportRouter.
	EngineTransport EngineTransport `json:"engine_transport,omitempty"`
	// ClientTransport says what serves HTTP to clients; empty is ClientTransportRouter.
	ClientTransport ClientTransport `json:"client_transport,omitempty"`
	// Tracing, request ids and debug headers: see trace.go. Tracing is nil when off.
	Tracing   *Tracing  `json:"tracing,omitempty"`
	RequestID RequestID `json:"request_id"`
	Debug     Debug     `json:"debug"`
	// The gateway in front of serving (gateway.go): client keys, TLS termination, TLS
	// to https engines, and a listener of its own for /metrics; nil is off.
	Auth      *Auth            `json:"auth,omitempty"`
	TLS       *TLS             `json:"tls,omitempty"`
	EngineTLS *EngineTLS       `json:"engine_tls,omitempty"`
	Metrics   *MetricsListener `json:"metrics,omitempty"`
}

// EngineTransport names the HTTP client of engine requests.
type EngineTransport string

const (
	// TransportRouter is the router's own transport for plain-http engines
	// (runtime/upstream), with net/http's for https and proxied ones.
	TransportRouter EngineTransport = "router"
	// TransportNetHTTP is net/http's Transport for every engine: the switch back.
	TransportNetHTTP EngineTransport = "net_http"
)

// ClientTransport names the HTTP server of the router's clients.
type ClientTransport string

const (
	// ClientTransportRouter is the router's own HTTP/1.1 server (runtime/h1); with edge
	// TLS the router serves through net/http's, which negotiates HTTP/2.
	ClientTransportRouter ClientTransport = "router"
	// ClientTransportNetHTTP is net/http's server: the switch back.
	ClientTransportNetHTTP ClientTransport = "net_http"
)

// Health configures active health checks. An engine leaves every candidate set after
// FailureThreshold consecutive failed checks and returns after SuccessThreshold good ones.
type Health struct {
	IntervalMS       int `json:"interval_ms"`
	TimeoutMS        int `json:"timeout_ms"`
	FailureThreshold int `json:"failure_threshold"`
	SuccessThreshold int `json:"success_threshold"`
}

// Kind is the engine software. It decides the defaults of what differs between engines
// (load source, KV-event encoding, PD protocol); the compiler writes every one of them
// into the plan, so runtime code reads those fields, not the kind.
type Kind string

// Engine kinds.
const (
	KindSGLang Kind = "sglang"
	KindVLLM   Kind = "vllm"
)

// PD protocols: how a prefill engine hands a request's KV cache to its decode peer.
const (
	// PDBootstrap is SGLang's: bootstrap_host, bootstrap_port and bootstrap_room injected
	// into the same request sent to both engines at once.
	PDBootstrap = "bootstrap"
	// PDKVTransferParams is vLLM's (and llm-d's): the prefill request asks for a remote
	// decode through kv_transfer_params, and the decode request carries the
	// kv_transfer_params the prefill answered with.
	PDKVTransferParams = "kv_transfer_params"
)

// Engine is one SGLang- or vLLM-compatible engine endpoint.
type Engine struct {
	Kind Kind `json:"kind"`
	// ID and URL are empty only in a DNS source's template.
	ID    string `json:"id,omitempty"`
	URL   string `json:"url,omitempty"`
	Model string `json:"model"`
	Role  Role   `json:"role"`
	// BootstrapPort is the prefill engine's KV bootstrap port, injected into PD requests.
	BootstrapPort int `json:"bootstrap_port,omitempty"`
	// DPSize is the number of data-parallel ranks; a load report is usable only when all
	// of them are fresh.
	DPSize   int        `json:"dp_size"`
	Load     LoadSource `json:"load"`
	KVEvents *KVEvents  `json:"kv_events,omitempty"`
	// PDProtocol is PDBootstrap or PDKVTransferParams.
	PDProtocol string `json:"pd_protocol"`
	// PDCompat says which engines of the other PD role this one can exchange KV caches
	// with; nil declares nothing, so the engine pairs with every engine of the model.
	PDCompat *PDCompat `json:"pd_compat,omitempty"`
}

// PDCompat is what a prefill or decode engine declares about its KV transfer. Two engines
// can pair when every field both of them declare is equal; a field one of them leaves out
// is not compared, so an operator declares only what the engines cannot bridge.
type PDCompat struct {
	// TransferBackend is the KV transfer engine, e.g. SGLang's --disaggregation-transfer-backend
	// (mooncake, nixl) or vLLM's kv_connector.
	TransferBackend string `json:"transfer_backend,omitempty"`
	// PageSize is the engine's KV page size in tokens; 0 is not declared.
	PageSize int `json:"page_size,omitempty"`
	// TPSize is the engine's tensor-parallel size; 0 is not declared.
	TPSize int `json:"tp_size,omitempty"`
	// Group is an explicit compatibility group: engines of different groups never pair.
	Group string `json:"group,omitempty"`
}

// PDMismatch says why a prefill engine declaring p cannot hand its KV cache to a decode
// engine declaring d, or returns "" when they can pair. Both the compiler (a bucket whose
// groups can never pair) and selection (a decode pick for the chosen prefill) use it, so
// the two cannot disagree.
func PDMismatch(p, d *PDCompat) string {
	if p == nil || d == nil {
		return ""
	}
	switch {
	case p.Group != "" && d.Group != "" && p.Group != d.Group:
		return fmt.Sprintf("compatibility group %q is not %q", p.Group, d.Group)
	case p.TransferBackend != "" && d.TransferBackend != "" && p.TransferBackend != d.TransferBackend:
		return fmt.Sprintf("transfer backend %s is not %s", p.TransferBackend, d.TransferBackend)
	case p.PageSize != 0 && d.PageSize != 0 && p.PageSize != d.PageSize:
		return fmt.Sprintf("page size %d is not %d", p.PageSize, d.PageSize)
	case p.TPSize != 0 && d.TPSize != 0 && p.TPSize != d.TPSize:
		return fmt.Sprintf("TP size %d is not %d", p.TPSize, d.TPSize)
	}
	return ""
}

// LoadSource says where and how often the router reads an engine's load report.
type LoadSource struct {
	// Source is one of "loads" (GET /v1/loads), "get_load" (GET /get_load), "metrics"
	// (GET /metrics) or "none" (router-local accounting only).
	Source       string `json:"source"`
	IntervalMS   int    `json:"interval_ms"`
	StaleAfterMS int    `json:"stale_after_ms"`
}

// KV-event connection modes.
const (
	// KVConnect: the engine's publisher binds and the router dials it.
	KVConnect = "connect"
	// KVBind: the router binds the endpoint and publishers dial in; the message topic
	// names the engine.
	KVBind = "bind"
)

// KV-event encodings a publisher may send. The router decodes every one of them; the
// setting says what the engine sends, which the simulator reproduces.
const (
	EncodingSGLangArray = "sglang_array"
	EncodingVLLMArray   = "vllm_array"
	EncodingVLLMMap     = "vllm_map"
)

// KVEvents is an engine's ZMQ KV-event publisher.
type KVEvents struct {
	// Mode is KVConnect or KVBind.
	Mode     string `json:"mode"`
	Endpoint string `json:"endpoint"`
	Topic    string `json:"topic"`
	// Encoding is one of the Encoding constants.
	Encoding string `json:"encoding"`
	// ReplayEndpoint is the publisher's replay socket, asked for missed batches after a
	// sequence gap; empty means none, and a gap then drops the engine's blocks.
	ReplayEndpoint string `json:"replay_endpoint,omitempty"`
	// BlockSize is the engine's page size in tokens; 0 means kv.DefaultBlockSize (16).
	BlockSize int `json:"block_size,omitempty"`
	// MaxBlocks bounds the blocks the router tracks per DP rank; 0 means unbounded.
	MaxBlocks int `json:"max_blocks,omitempty"`
	// MaxMessageBytes bounds one message the publisher sends (all its frames); a peer
	// that declares more is disconnected before the router reads it. 0 means
	// zmtp.DefaultMaxMessageBytes (4 MiB).
	MaxMessageBytes int64 `json:"max_message_bytes,omitempty"`
	// AllowFrom lists the addresses (IPs, CIDR prefixes or host names, resolved when the
	// subscription starts) a bind-mode listener accepts publishers from; empty means the
	// host of the engine's URL, and every loopback address for a loopback engine.
	AllowFrom []string `json:"allow_from,omitempty"`
}

// Model is one served model name and its ordered bucket set.
type Model struct {
	Name                        string `json:"name"`
	SessionIDHeader             string `json:"session_id_header"`
	SessionIdleSecs             int    `json:"session_idle_secs"`
	SessionEvictionIntervalSecs int    `json:"session_eviction_interval_secs"`
	RoutingKeyHeader            string `json:"routing_key_header"`
	StickyIdleSecs              int    `json:"sticky_idle_secs"`
	StickyEvictionIntervalSecs  int    `json:"sticky_eviction_interval_secs"`
	// Tokenizer is the model's HuggingFace tokenizer; nil means the stand-in vocabulary.
	Tokenizer *Tokenizer `json:"tokenizer,omitempty"`
	// SLO says how requests' latency targets order the compatible buckets.
	SLO     SLOPreferences `json:"slo"`
	Buckets []Bucket       `json:"buckets"`
}

// SLO preferences: what a request's target does to the order of the compatible buckets.
const (
	// SLODisabled ignores the target (and its header).
	SLODisabled = "disabled"
	// SLOFirst tries every bucket whose estimate meets the target before any that misses
	// it: a tier.
	SLOFirst = "slo_first"
	// SLOBestEffort adds one penalty to a bucket whose estimate misses the target: within
	// the slo_first tiers, buckets meeting it are preferred.
	SLOBestEffort = "best_effort"
)

// SLOPreferences are a model's per-target preferences, each one of the SLO constants.
type SLOPreferences struct {
	// TTFT applies to the x-sgl-ttft-slo-ms target (time to first token, ms).
	TTFT string `json:"ttft"`
	// TPS applies to the x-sgl-tps-slo target (decode tokens per second).
	TPS string `json:"tps"`
}

// Enabled reports whether either preference orders buckets.
func (s SLOPreferences) Enabled() bool {
	return s.TTFT != SLODisabled && s.TTFT != "" || s.TPS != SLODisabled && s.TPS != ""
}

// Tokenizer locates a model's HuggingFace tokenizer files. The compiler resolves every path
// against the directory of the config file that names it and checks that the files load,
// so serving fails at start, not on the first request.
type Tokenizer struct {
	// Path is the tokenizer.json (or tokenizer.json.gz).
	Path string `json:"path"`
	// Config is the tokenizer_config.json with the chat template and special tokens; empty
	// when none was named and none lies beside Path.
	Config string `json:"config,omitempty"`
	// ChatTemplate is an inline Jinja template that replaces the config's.
	ChatTemplate string `json:"chat_template,omitempty"`
	// ChatTemplateFile is a file with a Jinja template that replaces the config's.
	ChatTemplateFile string `json:"chat_template_file,omitempty"`
	// EngineKind is the engine whose request handling chat renders reproduce: the two
	// kinds rebuild messages and tools differently before templating. The compiler fills
	// it in from the model's engines when the config leaves it out.
	EngineKind Kind `json:"engine_kind"`
}

// Bucket is a token-length class of requests with its own engine groups.
type Bucket struct {
	ID     string `json:"id"`
	Rank   int    `json:"rank"`
	Limits Limits `json:"limits"`
	// MaxContextTokens bounds input plus requested output; nil is unbounded.
	MaxContextTokens *int64 `json:"max_context_tokens,omitempty"`
	// Estimates are the bucket's latency estimates that SLO ordering compares with a
	// request's targets; nil has none, and then the bucket meets no target.
	Estimates *Estimates `json:"estimates,omitempty"`
	Groups    Groups     `json:"groups"`
}

// Estimates are a bucket's configured latency at capacity and, with Learn, what the
// router learns from the requests it serves there.
type Estimates struct {
	// TTFTMS is the time to first token at capacity, p95, in milliseconds.
	TTFTMS *float64 `json:"ttft_ms,omitempty"`
	// TPS is the decode throughput per request at capacity, p05, in tokens per second.
	TPS *float64 `json:"tps,omitempty"`
	// Learn, when set, replaces a configured estimate with the one observed while it has
	// enough recent samples.
	Learn *Learn `json:"learn,omitempty"`
}

// Learn bounds and ages the learned estimates of a bucket.
type Learn struct {
	// Samples is how many recent observations of each kind the bucket keeps.
	Samples int `json:"samples"`
	// HalfLifeSecs is the age at which an observation counts half.
	HalfLifeSecs int `json:"half_life_secs"`
	// MinSamples is the decayed weight the observations must reach before the learned
	// estimate is used.
	MinSamples int `json:"min_samples"`
}

// Limits is the inclusive input-token range of a bucket. A nil Max is unbounded.
type Limits struct {
	Min int64  `json:"min"`
	Max *int64 `json:"max,omitempty"`
}

// Groups holds exactly one of Plain or PD.
type Groups struct {
	Plain *Group    `json:"plain,omitempty"`
	PD    *PDGroups `json:"pd,omitempty"`
}

// PDGroups is a complete prefill/decode pair; half a pair cannot be expressed.
type PDGroups struct {
	Prefill Group `json:"prefill"`
	Decode  Group `json:"decode"`
}

// Group is an engine membership set with its policy.
type Group struct {
	// WorkerIDs nil means every healthy engine of the model and role; an empty, non-nil
	// slice means no engine at all.
	WorkerIDs []string `json:"worker_ids"`
	Policy    Policy   `json:"policy"`
}

// Policy is a policy attachment: its type, hard admission caps and type-specific tuning.
// Tuning fields are set only for the policy type that owns them.
type Policy struct {
	Type      PolicyType `json:"type"`
	Admission Admission  `json:"admission"`

	// Fallback is the sticky policy's choice for a new or missing routing key.
	Fallback PolicyType `json:"fallback,omitempty"`

	// Cache-aware tuning.
	// MinMatchedTokens and SwitchMarginTokens may be 0, so they are pointers: an explicit
	// 0 shows in the effective config, and nil (not cache_aware) is left out.
	MinMatchedTokens     *int64         `json:"min_matched_tokens,omitempty"`
	MinMatchRatio        *float64       `json:"min_match_ratio,omitempty"`
	CandidateMinWorkers  int            `json:"candidate_min_workers,omitempty"`
	CandidateRatio       float64        `json:"candidate_ratio,omitempty"`
	CandidateMaxWorkers  int            `json:"candidate_max_workers,omitempty"`
	SwitchMarginTokens   *int64         `json:"switch_margin_tokens,omitempty"`
	WorkerQueueLimit     int64          `json:"worker_queue_limit,omitempty"`
	SaturationQueueFloor int64          `json:"saturation_queue_floor,omitempty"`
	MinLoadChoices       int            `json:"min_load_choices,omitempty"`
	PressureGuard        *PressureGuard `json:"pressure_guard,omitempty"`
	PrefixSource         *PrefixSource  `json:"prefix_source,omitempty"`
}

// Admission is a set of per-engine hard caps. Zero means the cap is not set. A cap admits
// while the engine's current metric is below it.
type Admission struct {
	MaxRunningRequests      int64 `json:"max_running_requests,omitempty"`
	MaxWaitingRequests      int64 `json:"max_waiting_requests,omitempty"`
	MaxKVTokens             int64 `json:"max_kv_tokens,omitempty"`
	MaxPendingPrefillTokens int64 `json:"max_pending_prefill_tokens,omitempty"`
	MaxInflightRequests     int64 `json:"max_inflight_requests,omitempty"`
}

// PressureGuard lets pressure override cache affinity when the prefix owner is much busier.
type PressureGuard struct {
	Enabled            bool     `json:"enabled"`
	AbsThresholdTokens int64    `json:"abs_threshold_tokens"`
	AbsThresholdMS     *float64 `json:"abs_threshold_ms,omitempty"`
	RelThreshold       float64  `json:"rel_threshold"`
}

// PrefixSource says where the cache-aware policy looks up prefix ownership.
type PrefixSource struct {
	// Type is "local_index" (index fed by KV events), "remote_indexer" or "approximate"
	// (index learned from the router's own dispatches).
	Type               string `json:"type"`
	Endpoint           string `json:"endpoint,omitempty"`
	QueryTimeoutMS     int    `json:"query_timeout_ms,omitempty"`
	MaxInflightQueries int    `json:"max_inflight_queries,omitempty"`
	// Approximate source: each engine's share in tokens (0: the KV capacity the engine
	// reports, else prefix.DefaultCapacityTokens), how long an entry lives after its last
	// use (0, left out of the JSON: until the capacity evicts it) and the page size of its
	// hashes. The struct stays comparable: it keys the shared indexes.
	CapacityTokens int64 `json:"capacity_tokens,omitempty"`
	TTLSecs        int   `json:"ttl_secs,omitempty"`
	BlockSize      int   `json:"block_size,omitempty"`
	// Share is where an approximate source shares what it learns with other replicas:
	// ShareNone ("" or "none") keeps it in this router, ShareStore writes it to the
	// binding store and reads the other replicas' entries from there.
	Share string `json:"share,omitempty"`
	// SpeculativeTTLMS, for the local and approximate indexes, records each dispatched
	// prompt as held by its engine for this long as the dispatch starts, until the
	// engine's BlockStored events (local) or the dispatch's success (approximate) confirm
	// it; 0 is off.
	SpeculativeTTLMS int `json:"speculative_ttl_ms,omitempty"`
}

// Values of PrefixSource.Share.
const (
	ShareNone  = "none"
	ShareStore = "store"
)

// Model returns the named model, or nil.
func (p *Plan) Model(name string) *Model {
	for i := range p.Models {
		if p.Models[i].Name == name {
			return &p.Models[i]
		}
	}
	return nil
}

// Replica readiness policies: /readyz is 200 while at least one model, or every model,
// has the engines its buckets need.
const (
	ReadyAnyModel   = "any_model"
	ReadyEveryModel = "every_model"
)

// Binding stores.
const (
	BindingsMemory = "memory"
	BindingsRedis  = "redis"
)

// Bindings says where session and sticky bindings live. Nil in a plan means the
// in-process store, private to one router; "redis" shares them between router replicas
// through one Redis or Valkey server.
type Bindings struct {
	// Store is "memory" or "redis".
	Store string `json:"store"`
	// Address is the Redis server's HOST:PORT, for store "redis".
	Address string `json:"address,omitempty"`
	// KeyPrefix starts every key the router writes, so routers of different fleets can
	// share one Redis without seeing each other's bindings.
	KeyPrefix string `json:"key_prefix"`
	// TimeoutMS bounds one store operation; past it the operation is answered from the
	// router's local bindings and counts as a failure.
	TimeoutMS int `json:"timeout_ms"`
	// FailuresToDown is how many consecutive failed operations mark the store down, so
	// that one slow answer on a loaded node does not send the replica to its local
	// bindings.
	FailuresToDown int `json:"failures_to_down"`
	// RetryMS is how often a router whose store is down checks whether it is back.
	RetryMS int `json:"retry_ms"`
}

// DNSSource is a DNS name whose records are the engines of one model and role, re-resolved
// while the router runs (the Kubernetes headless-service pattern). Exactly one of Name
// (A/AAAA records, with Port) and SRV (SRV records, whose targets are resolved to
// addresses) is set.
type DNSSource struct {
	// ID starts every discovered engine's id, as ID:IP:PORT; the compiler derives it from
	// the name when the config leaves it out.
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	SRV    string `json:"srv,omitempty"`
	Port   int    `json:"port,omitempty"`
	Scheme string `json:"scheme"`
	Model  string `json:"model"`
	Role   Role   `json:"role"`
	// Engine holds every other field of the engines found; its Model and Role are the
	// source's, its ID and URL are empty, and in KVEvents the text HostPlaceholder stands
	// for each engine's address.
	Engine       Engine `json:"engine"`
	IntervalSecs int    `json:"interval_secs"`
	TimeoutMS    int    `json:"timeout_ms"`
	// Resolver is the HOST:PORT of the DNS server to ask; empty means the system's.
	Resolver   string `json:"resolver,omitempty"`
	MaxEngines int    `json:"max_engines"`
	// EmptyGrace is how many consecutive "no such name" answers keep the last set before
	// its engines are drained.
	EmptyGrace int `json:"empty_grace"`
}

// HostPlaceholder, in a DNS source's kv_events endpoint, replay endpoint or topic, is
// replaced by each discovered engine's address.
const HostPlaceholder = "{host}"
