package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/token"
)

// EngineSpec describes one simulated engine.
type EngineSpec struct {
	ID    string
	Model string
	// Kind is the engine software imitated: its load endpoints and metric names, its KV
	// event encoding and block hashes, its PD protocol. Empty means SGLang.
	Kind plan.Kind
	// Role is plain (the default), prefill or decode.
	Role plan.Role
	// Addr is the host:port to serve on. The host must be a loopback address; empty
	// means 127.0.0.1 on any free port.
	Addr string
	// BootstrapPort identifies a prefill engine to its decode peers: a decode request
	// whose bootstrap_host:bootstrap_port names a prefill engine of the same fleet waits
	// for that engine's prefill of the room.
	BootstrapPort int
	// DPSize is the number of data-parallel ranks, each with its own scheduler, cache and
	// KV event publisher; 0 means 1.
	DPSize int
	// KVEvents, when set, publishes KV events over ZMQ.
	KVEvents *KVEventsSpec
	// Config is the performance model; the zero value means DefaultConfig().
	Config Config
	// Faults are the failures simulated from the start.
	Faults Faults
	// Tokenizer turns prompts into token ids; nil means the stand-in vocabulary of
	// package token, which is what a router without a configured tokenizer computes.
	Tokenizer token.Tokenizer
}

// KVEventsSpec is where an engine publishes its KV events.
type KVEventsSpec struct {
	// Endpoint is "tcp://host:port" for DP rank 0; rank r uses port+r. A binding publisher
	// listens on 127.0.0.1 whatever the host, and port 0 picks free consecutive ports.
	Endpoint string
	// Dial makes the publisher connect to a router listening at Endpoint (the router's
	// kv_events.mode "bind") instead of binding it.
	Dial bool
	// Topic is the first frame of every message; empty means "kv@<id>@<model>".
	Topic string
	// Encoding is a plan.Encoding* name; empty means the engine kind's.
	Encoding string
	// ReplayEndpoint, when set, is where rank 0 binds its replay socket (rank r at
	// port+r, on 127.0.0.1; port 0 picks a free one).
	ReplayEndpoint string
}

// Engine is one running simulated engine.
type Engine struct {
	spec    EngineSpec
	url     string
	srv     *http.Server
	ln      net.Listener
	ranks   []*rank
	rooms   *rooms
	started time.Time
	// closing is closed when the engine shuts down, releasing handlers that wait.
	closing   chan struct{}
	closeOnce sync.Once // Kill and Fleet.Close may both close the engine

	faultsMu sync.Mutex // serialises SetFaults
	faults   atomic.Pointer[faultState]
	nextRank atomic.Uint64
	// received is the last inference request's trace context and id (received.go).
	received atomic.Pointer[Received]
}

// ID returns the engine's id.
func (e *Engine) ID() string { return e.spec.ID }

// Model returns the served model name.
func (e *Engine) Model() string { return e.spec.Model }

// Kind returns the engine software the simulator imitates.
func (e *Engine) Kind() plan.Kind { return e.spec.Kind }

// Role returns the engine's role.
func (e *Engine) Role() plan.Role { return e.spec.Role }

// URL returns the engine's base URL, such as http://127.0.0.1:31001.
func (e *Engine) URL() string { return e.url }

// BootstrapPort returns the bootstrap port a router should inject for this engine.
func (e *Engine) BootstrapPort() int { return e.spec.BootstrapPort }

// DPSize returns the number of data-parallel ranks.
func (e *Engine) DPSize() int { return len(e.ranks) }

// normalize fills defaults and checks a spec.
func (s *EngineSpec) normalize() error {
	if s.ID == "" || s.Model == "" {
		return errors.New("engine id and model are required")
	}
	switch s.Role {
	case "":
		s.Role = plan.RolePlain
	case plan.RolePlain, plan.RolePrefill, plan.RoleDecode:
	default:
		return fmt.Errorf("engine %s: unknown role %q", s.ID, s.Role)
	}
	if s.DPSize == 0 {
		s.DPSize = 1
	}
	if s.Tokenizer == nil {
		s.Tokenizer = token.Standin{}
	}
	if s.DPSize < 0 {
		return fmt.Errorf("engine %s: dp size must be positive", s.ID)
	}
	if s.Config == (Config{}) {
		s.Config = DefaultConfig()
	}
	if err := s.Config.Validate(); err != nil {
		return fmt.Errorf("engine %s: %w", s.ID, err)
	}
	if err := s.Faults.Validate(); err != nil {
		return fmt.Errorf("engine %s: %w", s.ID, err)
	}
	if s.Addr == "" {
		s.Addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("engine %s: address: %w", s.ID, err)
	}
	if !isLoopback(host) {
		return fmt.Errorf("engine %s: the simulator serves on loopback addresses only, not %q", s.ID, host)
	}
	switch s.Kind {
	case "":
		s.Kind = plan.KindSGLang
	case plan.KindSGLang, plan.KindVLLM:
	default:
		return fmt.Errorf("engine %s: unknown kind %q", s.ID, s.Kind)
	}
	if s.KVEvents != nil {
		kv := *s.KVEvents
		if kv.Topic == "" {
			kv.Topic = "kv@" + s.ID + "@" + s.Model
		}
		switch kv.Encoding {
		case "":
			kv.Encoding = plan.EncodingSGLangArray
			if s.Kind == plan.KindVLLM {
				kv.Encoding = plan.EncodingVLLMMap
			}
		case plan.EncodingSGLangArray, plan.EncodingVLLMArray, plan.EncodingVLLMMap:
		default:
			return fmt.Errorf("engine %s: unknown kv events encoding %q", s.ID, kv.Encoding)
		}
		s.KVEvents = &kv
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newEngine binds the engine's sockets; start makes it serve.
func newEngine(spec EngineSpec, rs *rooms) (*Engine, error) {
	if err := spec.normalize(); err != nil {
		return nil, err
	}
	e := &Engine{spec: spec, rooms: rs, started: time.Now(), closing: make(chan struct{})}
	e.faults.Store(&faultState{Faults: spec.Faults})
	pubs, err := e.openPublishers()
	if err != nil {
		return nil, err
	}
	caching := spec.Role != plan.RoleDecode
	for i := range spec.DPSize {
		var pub *publisher
		if pubs != nil {
			pub = pubs[i]
		}
		e.ranks = append(e.ranks, newRank(i, spec.Config, caching, pub, e.slowdown))
	}
	ln, err := net.Listen("tcp", spec.Addr)
	if err != nil {
		e.closePublishers()
		return nil, fmt.Errorf("engine %s: %w", spec.ID, err)
	}
	e.ln = ln
	e.url = "http://" + ln.Addr().String()
	e.srv = &http.Server{Handler: e.routes(), ReadHeaderTimeout: 10 * time.Second}
	return e, nil
}

// slowdown is the current Slowdown fault, for the ranks.
func (e *Engine) slowdown() float64 { return e.faults.Load().Slowdown }

// start runs the ranks and serves HTTP until ctx ends or close is called.
func (e *Engine) start(ctx context.Context, wg *sync.WaitGroup) {
	for _, k := range e.ranks {
		wg.Go(func() { k.run(ctx) })
	}
	wg.Go(func() { _ = e.srv.Serve(e.ln) }) // returns http.ErrServerClosed on close
}

// close stops serving: handlers that wait are released at once, the rest get a short
// grace period to finish.
func (e *Engine) close() error {
	first := false
	e.closeOnce.Do(func() { first = true })
	if !first {
		return nil
	}
	close(e.closing)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	if err != nil {
		err = e.srv.Close()
	}
	_ = e.ln.Close() // Serve may not have taken the listener over yet; a second close is harmless
	e.closePublishers()
	if err != nil {
		return fmt.Errorf("engine %s: %w", e.spec.ID, err)
	}
	return nil
}

// pickRank honours an explicit data_parallel_rank and otherwise goes round robin, like
// SGLang's default DP controller.
func (e *Engine) pickRank(want *int) *rank {
	if want != nil && *want >= 0 && *want < len(e.ranks) {
		return e.ranks[*want]
	}
	return e.ranks[e.nextRank.Add(1)%uint64(len(e.ranks))]
}

func (e *Engine) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", e.handleChat)
	mux.HandleFunc("POST /v1/completions", e.handleCompletions)
	mux.HandleFunc("POST /generate", e.handleGenerate)
	mux.HandleFunc("POST /v1/embeddings", e.inputs(e.embeddings))
	mux.HandleFunc("POST /v1/rerank", e.inputs(e.rerank))
	mux.HandleFunc("POST /v1/score", e.inputs(e.score))
	mux.HandleFunc("POST /classify", e.inputs(e.classify))
	mux.HandleFunc("GET /get_model_info", e.handleModelInfo)
	mux.HandleFunc("GET /health", e.handleHealth)
	mux.HandleFunc("GET /health_generate", e.handleHealth)
	mux.HandleFunc("GET /v1/models", e.handleModels)
	if e.spec.Kind == plan.KindVLLM {
		// vLLM has neither SGLang's load endpoints nor /server_info: load comes from
		// its Prometheus gauges.
		mux.HandleFunc("GET /metrics", e.handleVLLMMetrics)
		mux.HandleFunc("POST /reset_prefix_cache", e.handleFlush)
	} else {
		mux.HandleFunc("GET /server_info", e.handleServerInfo)
		mux.HandleFunc("GET /get_server_info", e.handleServerInfo)
		mux.HandleFunc("GET /v1/loads", e.handleLoads)
		mux.HandleFunc("GET /get_load", e.handleGetLoad)
		mux.HandleFunc("GET /metrics", e.handleMetrics)
		mux.HandleFunc("POST /flush_cache", e.handleFlush)
	}
	mux.HandleFunc("/sim/faults", e.handleFaults)
	mux.HandleFunc("GET /sim/received", e.handleReceived)
	return e.recordReceived(mux)
}
