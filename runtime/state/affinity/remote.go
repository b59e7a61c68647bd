package affinity

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/routerkit/router/runtime/plan"
)

// Remote is a router's connection to its shared binding store and what the router knows
// of the store's health. Every Shared namespace of the router uses it, so the store going
// down sends all of them to their local bindings at once, and one probe brings them all
// back.
//
// The store is marked down only after failuresToDown consecutive failed operations: one
// slow answer on a loaded node is answered locally, but it does not send the whole
// replica to its local bindings for a retry interval (a flip that split sessions between
// replicas with no fault injected). Any successful operation resets the count.
//
// While the store is down no operation is sent to it: requests would otherwise each wait
// for the timeout. Run probes it every retry interval instead.
type Remote struct {
	client         *redis.Client
	addr           string
	prefix         string
	timeout        time.Duration
	retry          time.Duration
	failuresToDown int64
	clock          func() time.Time

	up          atomic.Bool
	consecutive atomic.Int64  // failed operations since the last success
	errs        atomic.Uint64 // failed operations and probes
	local       atomic.Uint64 // operations answered from local bindings
	downs       atomic.Uint64 // changes from up to down
	mu          sync.Mutex
	since       time.Time // of the last change of up
	lastErr     string
	log         atomic.Pointer[slog.Logger]
}

// Defaults of a plan.Bindings whose fields are zero, the configuration's defaults.
// DefaultTimeout sits well above a loaded node's tail (p99.95 25 ms, worst 30 ms with
// redis-benchmark -c 50 on a 2-core machine shared by eight test runs) and above the
// stalls of up to 300 ms a fork or failover causes, so that neither splits a session;
// a dead store refuses connections at once, and only a silent one costs the timeout.
const (
	DefaultTimeout        = 500 * time.Millisecond
	DefaultFailuresToDown = 3
	DefaultRetry          = time.Second
)

// SetLogger makes the store's changes between up and down logged, once each: a warning
// when the router starts routing with local bindings, and when it stops.
func (r *Remote) SetLogger(log *slog.Logger) { r.log.Store(log) }

func (r *Remote) logChange(up bool, err error) {
	log := r.log.Load()
	if log == nil {
		return
	}
	if up {
		log.Info("binding store is back: session and sticky bindings are shared again", "address", r.addr)
		return
	}
	log.Warn("binding store is down: routing with this replica's local bindings", "address", r.addr, "error", err, "retry", r.retry)
}

// NewRemote returns a connection to the Redis server of cfg. It dials lazily, so it
// never fails: a store that is unreachable is reported down by the first operation or
// probe. clock is the time source of the status; nil means time.Now.
func NewRemote(cfg plan.Bindings, clock func() time.Time) *Remote {
	if clock == nil {
		clock = time.Now
	}
	timeout := time.Duration(cfg.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	retry := time.Duration(cfg.RetryMS) * time.Millisecond
	if retry <= 0 {
		retry = DefaultRetry
	}
	failures := int64(cfg.FailuresToDown)
	if failures <= 0 {
		failures = DefaultFailuresToDown
	}
	quietClient.Do(func() { redis.SetLogger(quiet{}) })
	r := &Remote{
		client: redis.NewClient(&redis.Options{
			Addr:        cfg.Address,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
			// A failed operation falls back to local bindings at once; retrying it
			// would only add the timeout again to the request.
			MaxRetries:            -1,
			DialerRetries:         1,
			ContextTimeoutEnabled: true,
		}),
		addr: cfg.Address, prefix: cfg.KeyPrefix, timeout: timeout, retry: retry,
		failuresToDown: failures, clock: clock, since: clock(),
	}
	r.up.Store(true)
	return r
}

// Up reports whether operations go to the store.
func (r *Remote) Up() bool { return r.up.Load() }

// ctx bounds one store operation.
func (r *Remote) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.timeout)
}

// fail records a failed operation, which its caller answers locally.
func (r *Remote) fail(err error) {
	r.local.Add(1)
	r.failed(err)
}

// failed records a failed operation or probe and marks the store down at the
// failuresToDown-th in a row.
func (r *Remote) failed(err error) {
	r.errs.Add(1)
	n := r.consecutive.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = err.Error()
	if n >= r.failuresToDown && r.up.Swap(false) {
		r.downs.Add(1)
		r.since = r.clock()
		r.logChange(false, err)
	}
}

// ok records a successful operation: the failures in a row start again from zero. The
// load first keeps the hot path from writing a cache line every replica op shares.
func (r *Remote) ok() {
	if r.consecutive.Load() != 0 {
		r.consecutive.Store(0)
	}
}

// Probe pings the store and marks it up by a good answer; a failed ping counts as a
// failed operation. It returns the ping's error.
func (r *Remote) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		r.failed(err)
		return err
	}
	r.consecutive.Store(0)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.up.Swap(true) {
		r.since = r.clock()
		r.logChange(true, nil)
	}
	return nil
}

// Run checks the store at once, then every retry interval while it is down, until ctx is
// done, and then closes the connection.
func (r *Remote) Run(ctx context.Context) {
	defer r.client.Close()
	_ = r.Probe(ctx)
	t := time.NewTicker(r.retry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !r.up.Load() {
				_ = r.Probe(ctx)
			}
		}
	}
}

// Status is the binding store as GET /admin/state reports it.
type Status struct {
	Store   string `json:"store"`
	Address string `json:"address,omitempty"`
	// Up is false while the router routes with its local bindings.
	Up bool `json:"up"`
	// Since is when Up last changed, or when the router started.
	Since     time.Time `json:"since"`
	LastError string    `json:"last_error,omitempty"`
	Errors    uint64    `json:"errors"`
	// LocalOps counts binding operations answered locally because the store was down or
	// the operation failed.
	LocalOps uint64 `json:"local_ops"`
	// Downs counts the changes from up to down, each after failures_to_down failures in
	// a row: a replica that flaps shows here.
	Downs uint64 `json:"downs"`
}

// Status returns the store's current status.
func (r *Remote) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Status{
		Store: plan.BindingsRedis, Address: r.addr, Up: r.up.Load(), Since: r.since,
		LastError: r.lastErr, Errors: r.errs.Load(), LocalOps: r.local.Load(), Downs: r.downs.Load(),
	}
}

// quiet drops go-redis's own log lines, one per failed dial, printed past the router's
// logger: the router reports the store's failures in its status and metrics instead.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietClient sync.Once

// isMiss reports whether err only says the key does not exist.
func isMiss(err error) bool { return errors.Is(err, redis.Nil) }
