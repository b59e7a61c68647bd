package server_test

// Helpers of the end-to-end tests of engine kinds: a router over simulated SGLang and
// vLLM engines, all real HTTP and ZMQ sockets on 127.0.0.1.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/control"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/server"
	"github.com/routerkit/router/runtime/sim"
	"github.com/routerkit/router/runtime/upstream"
)

// routedTo records which engine host each request the router dispatched went to.
type routedTo struct {
	next  http.RoundTripper
	mu    sync.Mutex
	hosts []string
}

func (r *routedTo) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost {
		r.mu.Lock()
		r.hosts = append(r.hosts, req.URL.Host)
		r.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

func (r *routedTo) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.hosts) == 0 {
		return ""
	}
	return r.hosts[len(r.hosts)-1]
}

// kindsFleet is a router serving a simulated fleet, with a map from engine host to id.
// Engines with a replay endpoint get one on a free port, which the plan then names.
type kindsFleet struct {
	fleet  *sim.Fleet
	url    string
	routed *routedTo
	byHost map[string]string
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startKindsFleet starts the plan's engines as simulated ones of their kinds, KV-event
// encodings and modes: connect-mode publishers bind free ports, which the plan then
// names; bind-mode publishers dial the port the plan gives the router. Then it serves
// the router on a free port.
func startKindsFleet(t *testing.T, p *plan.Plan, cfg sim.Config) *kindsFleet {
	t.Helper()
	specs, err := sim.SpecsFromPlan(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range specs {
		specs[i].Addr = ""
		if kv := specs[i].KVEvents; kv != nil && !kv.Dial {
			kv.Endpoint = "tcp://127.0.0.1:0"
		}
		if kv := specs[i].KVEvents; kv != nil && kv.ReplayEndpoint != "" {
			kv.ReplayEndpoint = "tcp://127.0.0.1:0"
		}
	}
	fleet, err := sim.Start(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	kf := &kindsFleet{fleet: fleet, byHost: map[string]string{}, routed: &routedTo{next: &upstream.Transport{Dial: (&net.Dialer{}).DialContext, Fallback: http.DefaultTransport}}}
	for i := range p.Engines {
		e := &p.Engines[i]
		se := fleet.Engine(e.ID)
		e.URL = se.URL()
		kf.byHost[strings.TrimPrefix(se.URL(), "http://")] = e.ID
		if e.KVEvents != nil && e.KVEvents.Mode == plan.KVConnect {
			e.KVEvents.Endpoint = se.KVEndpoints()[0]
		}
		if e.KVEvents != nil && e.KVEvents.ReplayEndpoint != "" {
			e.KVEvents.ReplayEndpoint = se.KVReplayEndpoints()[0]
		}
	}
	srv, err := server.New(p, server.Options{Transport: kf.routed, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kf.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	wait.For(t, "router ready", func() bool {
		resp, err := http.Get(kf.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return kf
}

// chat posts a non-streaming chat request to base (an engine or the router) and returns
// the status.
func chat(t *testing.T, base, prompt string, maxTokens int) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": maxTokens,
		"messages": []map[string]string{{"role": "user", "content": prompt}}})
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// metric reads one sample of the router's /metrics, -1 when absent.
func (kf *kindsFleet) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get(kf.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func prompt(tag string) string {
	return fmt.Sprintf("%s: %s", tag, strings.Repeat(tag+" shares this long prefix with nobody else; ", 20))
}

// state reads the router's /admin/state engines by id.
func (kf *kindsFleet) state(t *testing.T) map[string]control.EngineState {
	t.Helper()
	resp, err := http.Get(kf.url + "/admin/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st control.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	out := map[string]control.EngineState{}
	for _, e := range st.Engines {
		out[e.ID] = e
	}
	return out
}
