package kv

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

func remotePlan(endpoint string) *plan.Plan {
	src := &plan.PrefixSource{Type: "remote_indexer", Endpoint: endpoint, QueryTimeoutMS: 50, MaxInflightQueries: 1}
	cache := plan.Policy{Type: plan.CacheAware, PrefixSource: src}
	return &plan.Plan{
		Engines: []plan.Engine{
			{ID: "P1", URL: "http://10.0.0.1:30000", Model: "m", Role: plan.RolePrefill},
			{ID: "P2", URL: "http://10.0.0.2:30000/", Model: "m", Role: plan.RolePrefill, KVEvents: &plan.KVEvents{BlockSize: 32}},
		},
		Models: []plan.Model{{Name: "m", Buckets: []plan.Bucket{
			{ID: "a", Groups: plan.Groups{PD: &plan.PDGroups{Prefill: plan.Group{Policy: cache}, Decode: plan.Group{Policy: plan.Policy{Type: plan.PowerOfTwo}}}}},
			{ID: "b", Groups: plan.Groups{PD: &plan.PDGroups{Prefill: plan.Group{Policy: cache}, Decode: plan.Group{Policy: plan.Policy{Type: plan.PowerOfTwo}}}}},
		}}},
	}
}

func TestRemoteQuery(t *testing.T) {
	var got query
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/query" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		// P2's URL without its trailing slash, an unknown engine, a zero and an
		// overlong match.
		w.Write([]byte(`{"matches": {"http://10.0.0.1:30000": 9, "http://10.0.0.2:30000": 2, "http://10.9.9.9:1": 3}}`))
	}))
	defer srv.Close()

	p := remotePlan(srv.URL + "/")
	remotes, err := NewRemotes(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := remotes[*p.Models[0].Buckets[0].Groups.PD.Prefill.Policy.PrefixSource]
	if len(remotes) != 1 || r == nil {
		t.Fatalf("clients = %v, want one for the source both groups share", remotes)
	}
	if sizes := r.BlockSizes("m"); len(sizes) != 2 || sizes[0] != 16 || sizes[1] != 32 {
		t.Fatalf("BlockSizes = %v, want [16 32]", sizes)
	}
	ms, err := r.Query(context.Background(), "m", 16, []int64{-1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if got.Model != "m" || got.BlockSize != 16 || len(got.BlockHashes) != 3 || got.BlockHashes[0] != -1 {
		t.Fatalf("query = %+v", got)
	}
	if s := matches(ms); s != "P1=3 P2=2" {
		t.Fatalf("matches = %s, want P1 capped at the query's 3 blocks and P2 by its URL", s)
	}
}

func TestRemoteFailures(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Test") {
		case "slow":
			select {
			case <-release:
				w.Write([]byte(`{"matches": {}}`))
			case <-r.Context().Done():
			}
		case "bad-request":
			http.Error(w, "block_size must be positive", http.StatusBadRequest)
		case "server-error":
			http.Error(w, "backend down", http.StatusServiceUnavailable)
		case "garbage":
			w.Write([]byte("{"))
		}
	}))
	defer srv.Close()
	defer once.Do(func() { close(release) })

	tagged := func(tag string) *http.Client {
		return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			r.Header.Set("X-Test", tag)
			return http.DefaultTransport.RoundTrip(r)
		})}
	}
	src := plan.PrefixSource{Type: "remote_indexer", Endpoint: srv.URL, QueryTimeoutMS: 50, MaxInflightQueries: 1}
	query := func(tag string) error {
		r, err := NewRemote(src, nil, tagged(tag))
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Query(context.Background(), "m", 16, []int64{1})
		return err
	}
	for _, tag := range []string{"slow", "server-error", "garbage"} {
		if err := query(tag); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: err = %v, want ErrUnavailable", tag, err)
		}
	}
	if err := query("bad-request"); err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "rejected the query: 400") {
		t.Errorf("bad request: err = %v, want a rejected query, not unavailability", err)
	}
	src.Endpoint = "http://127.0.0.1:1"
	if err := query(""); !errors.Is(err, ErrUnavailable) {
		t.Errorf("connection refused: err = %v, want ErrUnavailable", err)
	}

	// Over the in-flight limit a query fails at once instead of queueing.
	src.Endpoint, src.QueryTimeoutMS = srv.URL, 10_000
	r, _ := NewRemote(src, nil, tagged("slow"))
	done := make(chan error)
	go func() {
		_, err := r.Query(context.Background(), "m", 16, []int64{1})
		done <- err
	}()
	wait.For(t, "the first query in flight", func() bool { return len(r.slots) == 1 })
	if _, err := r.Query(context.Background(), "m", 16, []int64{1}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "1 queries already in flight") {
		t.Errorf("second query: err = %v, want ErrUnavailable for the in-flight limit", err)
	}
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Errorf("first query: %v", err)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNewRemoteRejectsGRPC(t *testing.T) {
	_, err := NewRemotes(remotePlan("grpc://10.0.0.10:50051"), nil)
	if err == nil || !strings.Contains(err.Error(), "model m: bucket a: ") || !strings.Contains(err.Error(), "not grpc://") {
		t.Fatalf("err = %v, want grpc:// rejected with its place", err)
	}
}
