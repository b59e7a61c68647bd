package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/dispatch"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
	"github.com/routerkit/router/runtime/state/kv"
)

// fleetCase is a router over simulated engines, all real HTTP servers on 127.0.0.1.
type fleetCase struct {
	fleet  *sim.Fleet
	srv    *Server
	url    string
	sent   *recordingTransport
	stop   context.CancelFunc
	served chan error
}

// startFleet starts one simulated engine per plan engine, points the plan at them and
// serves the router on a free port. The simulator runs at a hundredth of real time.
func startFleet(t testing.TB, p *plan.Plan) *fleetCase {
	return startScaledFleet(t, p, 0.01)
}

// startScaledFleet is startFleet with the simulator's time scale; 0 never sleeps.
func startScaledFleet(t testing.TB, p *plan.Plan, timeScale float64) *fleetCase {
	t.Helper()
	return startFleetWith(t, p, timeScale, Options{})
}

// startFleetWith is startScaledFleet with server options (the transport and logger are
// the helper's).
func startFleetWith(t testing.TB, p *plan.Plan, timeScale float64, opts Options) *fleetCase {
	t.Helper()
	fleet := startPlanSims(t, p, timeScale)
	fc := serveRouter(t, p, opts)
	fc.fleet = fleet
	return fc
}

// startPlanSims starts p's engines as startSims does and points p's engine URLs and KV
// event endpoints at them.
func startPlanSims(t testing.TB, p *plan.Plan, timeScale float64) *sim.Fleet {
	t.Helper()
	fleet := startSims(t, p, timeScale)
	for i := range p.Engines {
		e := fleet.Engine(p.Engines[i].ID)
		p.Engines[i].URL = e.URL()
		if kv := p.Engines[i].KVEvents; kv != nil {
			kv.Endpoint = e.KVEndpoints()[0]
		}
	}
	return fleet
}

// startSims starts one simulated engine per plan engine on free ports, stopped when the
// test ends.
func startSims(t testing.TB, p *plan.Plan, timeScale float64) *sim.Fleet {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.TimeScale = timeScale
	return startSimsWith(t, p, cfg)
}

// startSimsWith is startSims with every engine on the given simulator config.
func startSimsWith(t testing.TB, p *plan.Plan, cfg sim.Config) *sim.Fleet {
	t.Helper()
	specs, err := sim.SpecsFromPlan(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range specs {
		specs[i].Addr = ""
		if specs[i].KVEvents != nil {
			specs[i].KVEvents.Endpoint = "tcp://127.0.0.1:0"
		}
	}
	fleet, err := sim.Start(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fleet.Close() })
	return fleet
}

// serveRouter serves a router of p, whose engines already run, on a free port through a
// recording transport (opts' transport and logger are the helper's), and waits until it
// is ready.
func serveRouter(t testing.TB, p *plan.Plan, opts Options) *fleetCase {
	t.Helper()
	rec := &recordingTransport{next: dispatch.NewTransport(dispatch.TimeoutsOf(p.Timeouts), p.EngineTransport, nil)}
	opts.Transport = rec
	return serveWith(t, p, opts, rec)
}

// serveUnrecorded serves a router of p as serveRouter does, with the router's own
// transport: for benchmarks, which must not pay for copying and keeping every body.
func serveUnrecorded(t testing.TB, p *plan.Plan) *fleetCase {
	t.Helper()
	return serveWith(t, p, Options{}, nil)
}

// serveWith serves a router of p built with opts (its logger discards) and waits until it
// is ready; rec is what opts' transport records, if anything.
func serveWith(t testing.TB, p *plan.Plan, opts Options, rec *recordingTransport) *fleetCase {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	return serveListening(t, "127.0.0.1:0", p, opts, rec)
}

// serveListening is serveWith listening on addr (a port of 0 picks one) with opts' logger, or
// the default one; the router is reached through 127.0.0.1 whatever addr's host.
func serveListening(t testing.TB, addr string, p *plan.Plan, opts Options, rec *recordingTransport) *fleetCase {
	t.Helper()
	srv, err := New(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	fc := &fleetCase{srv: srv, url: fmt.Sprintf("http://127.0.0.1:%d", port), sent: rec, stop: cancel, served: make(chan error, 1)}
	go func() { fc.served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-fc.served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	wait.For(t, "router ready", func() bool {
		resp, err := http.Get(fc.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return fc
}

func (fc *fleetCase) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(fc.url+"/v1"), option.WithAPIKey("dummy"), option.WithMaxRetries(0))
}

// post sends a raw chat request and returns status, error code header and body.
func (fc *fleetCase) post(t *testing.T, body string, headers ...string) (int, string, string) {
	t.Helper()
	return fc.call(t, http.MethodPost, "/v1/chat/completions", body, headers...)
}

// call sends one request with the given header names and values and returns status,
// error code header and body.
func (fc *fleetCase) call(t *testing.T, method, path, body string, headers ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, fc.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Router-Error-Code"), string(b)
}

// inflightZero waits until no engine has a request in flight.
func (fc *fleetCase) inflightZero(t *testing.T) {
	t.Helper()
	wait.For(t, "in-flight back to zero", func() bool {
		for _, e := range fc.srv.current().plan.Engines {
			if fc.srv.reg.Get(e.ID).Inflight() != 0 {
				return false
			}
		}
		return true
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recordingTransport is the real transport plus a log of the bodies it sent, by host.
type recordingTransport struct {
	next    http.RoundTripper
	mu      sync.Mutex
	sent    map[string][][]byte
	headers map[string][]http.Header
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		r.mu.Lock()
		if r.sent == nil {
			r.sent = map[string][][]byte{}
		}
		r.sent[req.URL.Host] = append(r.sent[req.URL.Host], b)
		if r.headers == nil {
			r.headers = map[string][]http.Header{}
		}
		r.headers[req.URL.Host] = append(r.headers[req.URL.Host], req.Header.Clone())
		r.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

func (r *recordingTransport) headersTo(engineURL string) []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.headers[strings.TrimPrefix(engineURL, "http://")]
}

func (r *recordingTransport) bodies(engineURL string) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[strings.TrimPrefix(engineURL, "http://")]
}

// Plan builders: a plain model "m" and a PD model "pd".
func plainEngine(id string) plan.Engine {
	return plan.Engine{ID: id, URL: "http://127.0.0.1:1", Model: "m", Role: plan.RolePlain, DPSize: 1,
		Load: plan.LoadSource{Source: "loads", IntervalMS: 20, StaleAfterMS: 2000}}
}

func pdEngine(id string, role plan.Role, bootstrap int) plan.Engine {
	e := plainEngine(id)
	e.Model, e.Role, e.BootstrapPort = "pd", role, bootstrap
	return e
}

func group(typ plan.PolicyType, adm plan.Admission, ids ...string) plan.Group {
	return plan.Group{WorkerIDs: ids, Policy: plan.Policy{Type: typ, Admission: adm}}
}

func testPlan(engines []plan.Engine, models ...plan.Model) *plan.Plan {
	for i := range models {
		m := &models[i]
		m.SessionIDHeader, m.RoutingKeyHeader = "x-session-id", "x-sgl-routing-key"
	}
	// The grace outlasts net/http's 5 s wait for connections a client opened but sent
	// nothing on (see docs/serve.md, Shutdown), which a test's pooled clients can leave.
	return &plan.Plan{
		Listen: "127.0.0.1:0", ShutdownGraceSecs: 8, Engines: engines, Models: models,
		Health: plan.Health{IntervalMS: 20, TimeoutMS: 1000, FailureThreshold: 2, SuccessThreshold: 1},
	}
}

func i64(v int64) *int64 { return &v }

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx, cancel
}

// warmKV waits out ZMQ's slow joiner: a publisher drops events until the router's
// subscription reaches it, so each KV-event engine gets fresh prompts, sent to it
// directly, until the router's index shows one of them.
func (fc *fleetCase) warmKV(t *testing.T) {
	t.Helper()
	for i, e := range fc.srv.current().plan.Engines {
		if e.KVEvents == nil {
			continue
		}
		deadline := time.Now().Add(wait.Timeout)
		for round := 0; ; round++ {
			ids := make([]uint32, 2*kv.DefaultBlockSize)
			for j := range ids {
				ids[j] = uint32(1_000_000*(i+1) + 1000*round + j)
			}
			raw, _ := json.Marshal(ids)
			resp, err := http.Post(e.URL+"/generate", "application/json", strings.NewReader(`{"input_ids": `+string(raw)+`, "sampling_params": {"max_new_tokens": 1}}`))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			indexed := false
			for range 20 {
				if len(fc.srv.current().deps.KV.Lookup(ids, kv.DefaultBlockSize)) > 0 {
					indexed = true
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if indexed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the router's index saw none of %s's KV events in %v (%d prompts)", e.ID, wait.Timeout, round+1)
			}
		}
	}
}
