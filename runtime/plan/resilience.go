package plan

// Timeouts bound every phase of a dispatch, so a hung or slow engine costs a bounded time
// and answers the client 504 instead of holding it forever. All values are milliseconds
// and positive; the compiler fills in the defaults.
type Timeouts struct {
	// ConnectMS bounds establishing the TCP connection to an engine.
	ConnectMS int `json:"connect_ms"`
	// FirstByteMS bounds the wait for the engine's response headers. Streams get them at
	// once; a non-streamed answer gets them only when generation is done.
	FirstByteMS int `json:"first_byte_ms"`
	// StreamIdleMS bounds the gap between two reads of a response body (stream chunks).
	StreamIdleMS int `json:"stream_idle_ms"`
	// TotalMS bounds a whole dispatch, response body included.
	TotalMS int `json:"total_ms"`
	// PrefillStatusMS bounds how long a PD decode response waits for its prefill half's
	// status; set it to the engines' KV bootstrap timeout.
	PrefillStatusMS int `json:"prefill_status_ms"`
	// BodyReadMS bounds reading a client's request body, against clients that trickle it.
	BodyReadMS int `json:"body_read_ms"`
}

// ServerLimits cap what clients can hold on the router.
type ServerLimits struct {
	// MaxConcurrentRequests caps requests being served at once; more wait in their
	// model's queue (Queue), or are answered 503 at once without one.
	MaxConcurrentRequests int `json:"max_concurrent_requests"`
	// MaxConnections caps open client connections; more wait in the listen backlog. From
	// 15/16 of it on, each new connection closes the longest-idle keep-alive one.
	MaxConnections int `json:"max_connections"`
	// MaxTokenizeBytes caps the text one request has tokenized: a chat's rendered
	// prompt, a batch's prompts together. More is answered 413 before it is tokenized.
	MaxTokenizeBytes int64 `json:"max_tokenize_bytes"`
	// MaxConnectionsPerClient caps open connections from one client address; one beyond
	// it is closed as soon as it is accepted. 0 leaves it off.
	MaxConnectionsPerClient int `json:"max_connections_per_client"`
}

// Breaker configures the per-engine circuit breaker: FailureThreshold consecutive
// dispatch failures (transport errors, timeouts, 429 and 5xx answers) open it, the engine
// leaves every candidate set for OpenMS, then one probe request decides.
type Breaker struct {
	FailureThreshold int `json:"failure_threshold"`
	OpenMS           int `json:"open_ms"`
}

// Retries bounds dispatching one request to another engine. Only attempts the engine
// never received are retried (connection refused, breaker open).
type Retries struct {
	// MaxAttempts counts the first dispatch; 1 disables retries.
	MaxAttempts int `json:"max_attempts"`
}

// HeaderPolicy says which client headers reach engines; both PD halves get the same set.
// Hop-by-hop headers, Cookie, Host and the router's own framing headers are never
// forwarded.
type HeaderPolicy struct {
	// Allow, when non-empty, is the only client headers forwarded (canonical names).
	Allow []string `json:"allow"`
	// Deny names further headers never forwarded.
	Deny []string `json:"deny"`
}

// StateLimits bound the state clients can grow.
type StateLimits struct {
	// AffinityMaxKeys caps each affinity store; the least recently used binding goes.
	AffinityMaxKeys int `json:"affinity_max_keys"`
}

// Queue lets requests that find no capacity wait, per model, first come first served
// (runtime/queue).
type Queue struct {
	// Size is how many requests may wait per model; 0 answers at once.
	Size int `json:"size"`
	// TimeoutMS is the longest a request waits, all its waits together.
	TimeoutMS int `json:"timeout_ms"`
}

// RateLimit is the global token bucket of routed requests.
type RateLimit struct {
	// RequestsPerSecond refills the bucket.
	RequestsPerSecond float64 `json:"requests_per_second"`
	// Burst is the bucket's capacity; the compiler fills in max_concurrent_requests.
	Burst int `json:"burst"`
}
