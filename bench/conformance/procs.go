// Package conformance runs the router against an engine nobody here wrote,
// llm-d-inference-sim (llm-d's vLLM simulator, in Go), and checks what the router reads
// from it: both KV-event formats in bind mode with two publishers on one endpoint and one
// restarting, vLLM's load from /metrics, prefix hits on repeated completions, and a short
// routing-quality run whose prefill time depends on the uncached tokens. `make
// conformance` builds the simulator from the Go module proxy and runs it; it is not part
// of `make test`, which needs nothing from outside the repository.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/routerkit/router/internal/proc"
)

// Model is the model name the simulators serve; with --force-dummy-tokenizer they never
// ask a model hub for it.
const Model = "fake-model"

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Sim is one llm-d-inference-sim process serving on 127.0.0.1:Port and publishing its KV
// events to the router's bind endpoint under the topic kv@Name@fake-model.
type Sim struct {
	Name string
	Port int
	args []string
	log  string
	cmd  *exec.Cmd
}

// Topic is the KV-event topic the simulator publishes under: kv@<POD_IP>@<model>
// (pkg/kv-cache/block_cache.go CreateKVEventsTopic), with POD_IP set to its name.
func (s *Sim) Topic() string { return "kv@" + s.Name + "@" + Model }

// URL is the simulator's HTTP base URL.
func (s *Sim) URL() string { return "http://127.0.0.1:" + strconv.Itoa(s.Port) }

// SimOptions are the simulator settings a run varies.
type SimOptions struct {
	MapFormat bool // vLLM's map event format (--use-vllm-map-event-format) instead of the array one
	// PrefillPerToken is --prefill-time-per-token: prefill time per uncached prompt token.
	PrefillPerToken time.Duration
	CacheBlocks     int // --kv-cache-size, in 16-token blocks
}

// NewSim prepares a simulator publishing to kvEndpoint (the router's bind endpoint); dir
// holds its log.
func NewSim(dir, name, kvEndpoint string, o SimOptions) (*Sim, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--model", Model, "--force-dummy-tokenizer", "--port", strconv.Itoa(port),
		"--max-model-len", "32768", "--max-num-seqs", "64",
		"--enable-kvcache", "--block-size", "16", "--kv-cache-size", strconv.Itoa(o.CacheBlocks),
		"--zmq-endpoint", kvEndpoint, "--event-batch-size", "16",
		"--prefill-time-per-token", o.PrefillPerToken.String(), "--inter-token-latency", "1ms"}
	if o.MapFormat {
		args = append(args, "--use-vllm-map-event-format")
	}
	return &Sim{Name: name, Port: port, args: args, log: filepath.Join(dir, name+".log")}, nil
}

// Start runs the simulator and waits until it answers /health.
func (s *Sim) Start(bin string) error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Env = append(os.Environ(), "POD_IP="+s.Name)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting simulator %s: %w", s.Name, err)
	}
	if err := waitOK(s.URL()+"/health", 30*time.Second); err != nil {
		s.Kill()
		return fmt.Errorf("simulator %s (log %s): %w", s.Name, s.log, err)
	}
	return nil
}

// Kill ends the simulator at once, as a crash would: its KV-event connection drops
// without a goodbye.
func (s *Sim) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Router is a `router serve` process.
type Router struct {
	URL string
	cmd *exec.Cmd
}

// StartRouter writes config to dir and serves it, waiting until /healthz answers 200:
// the router then listens for KV events, and its engines may start after it.
func StartRouter(bin, dir, config string) (*Router, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "router.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "router.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the router: %w", err)
	}
	r := &Router{URL: "http://" + addr, cmd: cmd}
	if err := waitOK(r.URL+"/healthz", 30*time.Second); err != nil {
		r.Stop()
		return nil, fmt.Errorf("router (log %s): %w", logf.Name(), err)
	}
	return r, nil
}

// Stop ends the router.
func (r *Router) Stop() { proc.Stop(r.cmd, 5*time.Second) }

func waitOK(url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer 200 within %s", url, limit)
}

// EngineState is the part of the router's /admin/state an engine entry the run reads.
type EngineState struct {
	ID   string `json:"id"`
	Load *struct {
		Running int64 `json:"running"`
		Waiting int64 `json:"waiting"`
		KVKnown bool  `json:"kv_known"`
	} `json:"load"`
	ReportAgeMS float64 `json:"report_age_ms"`
	LoadError   string  `json:"load_error"`
	PrefixIndex []struct {
		Source string `json:"source"`
		Blocks int    `json:"blocks"`
	} `json:"prefix_index"`
}

// Blocks is what the router's event-fed index holds for the engine.
func (e EngineState) Blocks() int {
	for _, p := range e.PrefixIndex {
		if p.Source == "local_index" {
			return p.Blocks
		}
	}
	return 0
}

// State is the part of /admin/state the run reads.
type State struct {
	Engines   []EngineState `json:"engines"`
	Decisions []struct {
		Engines map[string]string `json:"engines"`
		Status  int               `json:"status"`
	} `json:"decisions"`
}

// Engine returns the engine's entry.
func (s State) Engine(id string) EngineState {
	for _, e := range s.Engines {
		if e.ID == id {
			return e
		}
	}
	return EngineState{ID: id}
}

// AdminState reads the router's /admin/state.
func (r *Router) AdminState() (State, error) {
	var st State
	resp, err := http.Get(r.URL + "/admin/state")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Complete sends a completion of prompt ids to base (the router or an engine) with
// max_tokens 2, streamed, and returns the time to the first response byte.
func Complete(ctx context.Context, client *http.Client, base string, prompt []uint32) (time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"model": Model, "prompt": prompt, "max_tokens": 2, "stream": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var first [1]byte
	n, err := io.ReadFull(resp.Body, first[:])
	ttft := time.Since(start)
	rest, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("completion at %s: status %d: %s", base, resp.StatusCode, append(first[:n], rest...))
	}
	if err != nil {
		return 0, fmt.Errorf("completion at %s: %w", base, err)
	}
	return ttft, nil
}

// PrefixCache is a simulator's vllm:prefix_cache_queries and vllm:prefix_cache_hits
// counters (vLLM itself names them with _total), in prompt tokens.
type PrefixCache struct{ Queries, Hits float64 }

// Sub is the counters' growth since before.
func (p PrefixCache) Sub(before PrefixCache) PrefixCache {
	return PrefixCache{Queries: p.Queries - before.Queries, Hits: p.Hits - before.Hits}
}

// ReadPrefixCache reads a simulator's prefix-cache counters from its /metrics.
func ReadPrefixCache(s *Sim) (PrefixCache, error) { return readPrefixCache(s.URL()) }

// readPrefixCache reads the prefix-cache counters of the engine at base.
func readPrefixCache(base string) (PrefixCache, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return PrefixCache{}, err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return PrefixCache{}, err
	}
	// The series appear with the first request; before it they are zero.
	var p PrefixCache
	for _, line := range bytes.Split(text, []byte("\n")) {
		name, value, ok := metricLine(line)
		switch {
		case !ok:
		case strings.TrimSuffix(name, "_total") == "vllm:prefix_cache_queries":
			p.Queries += value
		case strings.TrimSuffix(name, "_total") == "vllm:prefix_cache_hits":
			p.Hits += value
		}
	}
	return p, nil
}

// metricLine splits a Prometheus text line into its metric name (labels dropped) and value.
func metricLine(line []byte) (string, float64, bool) {
	if len(line) == 0 || line[0] == '#' {
		return "", 0, false
	}
	sp := bytes.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(string(line[sp+1:]), 64)
	if err != nil {
		return "", 0, false
	}
	name := line[:sp]
	if i := bytes.IndexByte(name, '{'); i >= 0 {
		name = name[:i]
	}
	return string(bytes.TrimSpace(name)), v, true
}
