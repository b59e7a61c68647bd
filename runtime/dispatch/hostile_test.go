package dispatch

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/bucket"
	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/policy"
	"github.com/routerkit/router/runtime/request"
)

// recorder is the client's response writer for dispatches the tests make directly.
type recorder struct {
	*httptest.ResponseRecorder
	wrote bool
}

func newRecorder() *recorder { return &recorder{ResponseRecorder: httptest.NewRecorder()} }

func (r *recorder) WriteHeader(code int) {
	if code >= 200 {
		r.wrote = true
	}
	r.ResponseRecorder.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) { r.wrote = true; return r.ResponseRecorder.Write(b) }
func (r *recorder) ID() string                  { return "req-1" }
func (r *recorder) Served() bool                { return r.Status() == http.StatusOK }
func (r *recorder) StreamFailed(err *Error) []byte {
	return []byte(`{"error":{"message":"` + err.Error() + `"}}`)
}

func (r *recorder) Status() int {
	if !r.wrote {
		return 0
	}
	return r.Code
}

// newTestDispatcher is a dispatcher with the production transport and default deadlines.
func newTestDispatcher() *Dispatcher {
	p := &plan.Plan{}
	return New(p, &http.Client{Transport: NewTransport(TimeoutsOf(p.Timeouts), p.EngineTransport, nil)}, nil, policy.Deps{}, slog.New(slog.DiscardHandler))
}

// engineAt is a worker for the engine server srv, with a breaker that opens after
// threshold failures and stays open for the test.
func engineAt(id string, role plan.Role, srv *httptest.Server, threshold int) *engine.Worker {
	w := engine.New(plan.Engine{ID: id, Role: role, URL: srv.URL, BootstrapPort: 8998})
	w.SetBreaker(engine.NewBreaker(threshold, time.Hour, nil))
	return w
}

// countingEngine is an engine server that answers every request with status and body,
// counting them.
func countingEngine(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

const okAnswer = `{"id":"x","object":"chat.completion","choices":[]}`

// sendPlain dispatches a chat request on path to the first of engines whose breaker lets
// selection pick it (Worker.Available, as selection asks), as Dispatcher.once does for a
// plain bucket.
func sendPlain(t *testing.T, dp *Dispatcher, path string, engines ...*engine.Worker) (*engine.Worker, *Error) {
	t.Helper()
	for _, e := range engines {
		if !e.Available() || !acquire(e) {
			continue
		}
		r := httptest.NewRequest(http.MethodPost, path, nil)
		return e, dp.forward(r.Context(), newRecorder(), r, payload{head: []byte(`{"model":"m","messages":[]}`)}, e, plan.RolePlain, nil)
	}
	t.Fatal("no engine available")
	return nil, nil
}

// An engine answering 404 to every chat request (a wrong --served-model-name, another
// server on its port) fails every request the same way: its breaker opens after the
// threshold and the traffic moves to the good engine; the client gets a 502, not the
// engine's 404 as if its request were wrong. An engine answering 400, 413 or 422, or 404
// on a route not every engine serves (embeddings on a chat model), is refusing the
// client's request: its breaker stays closed whatever the count.
func TestBreakerCountsTheEnginesOwn4xx(t *testing.T) {
	good, goodN := countingEngine(t, http.StatusOK, okAnswer)
	for _, tc := range []struct {
		name   string
		status int
		path   string
		trips  bool
	}{
		{"404 on chat", http.StatusNotFound, "/v1/chat/completions", true},
		{"405 on generate", http.StatusMethodNotAllowed, "/generate", true},
		{"404 on completions", http.StatusNotFound, "/v1/completions", true},
		{"400", http.StatusBadRequest, "/v1/chat/completions", false},
		{"413", http.StatusRequestEntityTooLarge, "/v1/chat/completions", false},
		{"422", http.StatusUnprocessableEntity, "/v1/chat/completions", false},
		{"404 on embeddings", http.StatusNotFound, "/v1/embeddings", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goodN.Store(0)
			badSrv, badN := countingEngine(t, tc.status, `{"error":{"message":"engine says no"}}`)
			const threshold, requests = 3, 10
			bad := engineAt("BAD", plan.RolePlain, badSrv, threshold)
			ok := engineAt("OK", plan.RolePlain, good, threshold)
			dp := newTestDispatcher()
			for i := range requests {
				e, err := sendPlain(t, dp, tc.path, bad, ok)
				if e != bad {
					continue
				}
				if err == nil || err.Kind != BadStatus || err.Status != tc.status {
					t.Fatalf("request %d: %v, want the engine's %d", i, err, tc.status)
				}
				if err.Rejection() == tc.trips {
					t.Errorf("request %d: rejection %v: the engine's own fault must be a 502, the client's a %d", i, err.Rejection(), tc.status)
				}
			}
			if tc.trips {
				if got := bad.Breaker().State(); got != engine.BreakerOpen {
					t.Errorf("breaker %v after %d answers %d, want open", got, badN.Load(), tc.status)
				}
				if badN.Load() != threshold || goodN.Load() != requests-threshold {
					t.Errorf("bad engine got %d requests, good %d: want %d and %d", badN.Load(), goodN.Load(), threshold, requests-threshold)
				}
				return
			}
			if got := bad.Breaker().State(); got != engine.BreakerClosed || bad.Breaker().Trips() != 0 {
				t.Errorf("breaker %v (%d trips) after %d client errors %d, want closed", got, bad.Breaker().Trips(), badN.Load(), tc.status)
			}
			if badN.Load() != requests || goodN.Load() != 0 {
				t.Errorf("bad engine got %d requests, good %d: want all %d on the first engine", badN.Load(), goodN.Load(), requests)
			}
		})
	}
}

// seenCancelled is the PD request's context as the decode half sees it in the moment
// the prefill half's failure cancels it: its Err is set, but the cancellation has not yet
// reached the decode dispatch's own context (context cancels a parent, then its
// children), so the decode's context has no cause yet. It stays so for the test, which
// makes that moment last.
type seenCancelled struct{ context.Context }

func (seenCancelled) Err() error { return context.Canceled }

// resettingEngine is an engine server that reads the request and closes the connection
// without an answer, as a decode engine does when its prefill's KV transfer is aborted.
func resettingEngine(t *testing.T, before func()) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if before != nil {
			before()
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Issue 25: a client still connected got 499 client_closed in 3 of 5,000 PD races. The
// decode half judged "the client left" from the PD request's context, which the prefill
// half cancels when it fails; a decode engine failing in the moment that cancellation is
// visible on the PD context but not yet on the decode's own was answered 499. The moment
// is held open here: the decode engine resets its connection while the PD context reads
// as cancelled. The client is still there, so the failure is the engine's (a 502).
func TestDecodeFailureWhilePDContextCancelsIsNotTheClientLeaving(t *testing.T) {
	dec := engineAt("D1", plan.RoleDecode, resettingEngine(t, nil), 5)
	dp := newTestDispatcher()
	base, stop := context.WithCancel(context.Background())
	defer stop()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	err := dp.forward(seenCancelled{base}, newRecorder(), r, payload{head: []byte(`{}`)}, dec, plan.RoleDecode, nil)
	if err == nil {
		t.Fatal("a reset decode engine succeeded")
	}
	if err.Kind == ClientGone {
		t.Fatalf("a decode failure while the PD context was being cancelled is %q: the client, still connected, would get 499", err)
	}
	if err.Kind != Transport || err.Worker != dec {
		t.Errorf("failure %q (kind %v), want the decode engine's connection failure", err, err.Kind)
	}
}

// The same race end to end, with both engines real: the prefill engine answers 503 and
// the decode engine, told by the test that the prefill answered, resets its connection.
// Whichever failure the router sees first, the client, still connected, gets a 5xx:
// the prefill's 503 or the decode's connection failure, never client_closed.
func TestPDPrefillFailureAndDecodeResetAnswer5xx(t *testing.T) {
	prefilled := make(chan struct{})
	var once sync.Once
	preSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, `{"error":{"message":"kv transfer aborted"}}`, http.StatusServiceUnavailable)
		once.Do(func() { close(prefilled) })
	}))
	t.Cleanup(preSrv.Close)
	decSrv := resettingEngine(t, func() {
		select {
		case <-prefilled:
		case <-time.After(wait.Timeout):
		}
	})
	pre, dec := engineAt("P1", plan.RolePrefill, preSrv, 5), engineAt("D1", plan.RoleDecode, decSrv, 5)
	dp := newTestDispatcher()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	sel := bucket.Selection{Bucket: &bucket.Bucket{}, Prefill: policy.Pick{Engine: pre}, Decode: policy.Pick{Engine: dec}}
	err := dp.Do(newRecorder(), r, &request.Prepared{Body: []byte(`{"model":"m","messages":[]}`)}, sel, nil)
	switch {
	case err == nil:
		t.Fatal("a PD request whose halves both failed succeeded")
	case err.Kind == ClientGone:
		t.Fatalf("the PD failure is %q: a connected client would get 499", err)
	case !(err.Kind == BadStatus && err.Status == http.StatusServiceUnavailable && err.Worker == pre) && !(err.Kind == Transport && err.Worker == dec):
		t.Errorf("the PD failure is %q (kind %v), want the prefill's 503 or the decode's connection failure", err, err.Kind)
	}
}

// Issue 25: the client's query string reached plain and decode engines but not the
// prefill half. Every half now gets the same URL, the client's path and query under the
// engine's URL (with the engine URL's own query first), as SGLang's PD router builds both
// halves' requests from one worker URL and route (sgl-project/sglang,
// sgl-model-gateway/src/routers/http/pd_router.rs at
// ca7a2204571486d6b4282fefe4f6af1c25e3acf2: execute_dual_dispatch_internal calls
// build_post_with_headers(prefill.url(), context.route, ...) and the same for the decode,
// which posts to api_path(url, route)). Both PD protocols, with real engine servers
// recording what they got.
func TestQueryReachesEveryPDHalf(t *testing.T) {
	type seen struct{ path, query string }
	record := func(t *testing.T, answer string) (*httptest.Server, chan seen) {
		got := make(chan seen, 4)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			got <- seen{r.URL.Path, r.URL.RawQuery}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
		}))
		t.Cleanup(srv.Close)
		return srv, got
	}
	const clientQuery = "trace=on&tag=a%20b"
	for _, protocol := range []string{plan.PDBootstrap, plan.PDKVTransferParams} {
		t.Run(protocol, func(t *testing.T) {
			preSrv, preGot := record(t, `{"kv_transfer_params":{"remote_engine_id":"p"},"choices":[]}`)
			decSrv, decGot := record(t, okAnswer)
			pre := engine.New(plan.Engine{ID: "P1", Role: plan.RolePrefill, PDProtocol: protocol, URL: preSrv.URL + "/sub?key=k1", BootstrapPort: 8998})
			dec := engine.New(plan.Engine{ID: "D1", Role: plan.RoleDecode, PDProtocol: protocol, URL: decSrv.URL})
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions?"+clientQuery, nil)
			sel := bucket.Selection{Bucket: &bucket.Bucket{}, Prefill: policy.Pick{Engine: pre}, Decode: policy.Pick{Engine: dec}}
			out := newRecorder()
			if err := newTestDispatcher().Do(out, r, &request.Prepared{Body: []byte(`{"model":"m","messages":[]}`)}, sel, nil); err != nil {
				t.Fatalf("PD dispatch: %v", err)
			}
			if p := <-preGot; p != (seen{"/sub/v1/chat/completions", "key=k1&" + clientQuery}) {
				t.Errorf("prefill got %q?%q, want the client's path and query under its URL", p.path, p.query)
			}
			if d := <-decGot; d != (seen{"/v1/chat/completions", clientQuery}) {
				t.Errorf("decode got %q?%q, want the client's path and query", d.path, d.query)
			}
		})
	}
}
