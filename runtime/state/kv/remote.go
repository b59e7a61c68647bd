package kv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// ErrUnavailable marks a remote lookup the indexer could not answer: a timeout, a
// connection failure, a server error, a malformed answer, or too many queries already in
// flight. The cache policy falls back to load-based selection, as on a miss, but reports
// the two differently.
var ErrUnavailable = errors.New("prefix indexer unavailable")

// Remote is a client of a remote prefix indexer: an external service that consumes the
// engines' KV events itself, so a router using it keeps no local index.
//
// SGLang's indexer speaks gRPC (proto/kv_indexer.proto), which is not available to this
// project, so Remote speaks a small JSON protocol instead:
//
//	POST {endpoint}/query
//	{"model": "llama", "block_size": 16, "block_hashes": [-3488128144981237669, ...]}
//
//	200 {"matches": {"http://10.0.0.5:30000": 12, ...}}
//
// block_hashes are the request's SGLang block hashes in order; each match is an engine URL
// and the number of leading blocks it holds. Engines are matched to the plan's by URL
// (ignoring a trailing slash); unknown URLs are ignored. A 4xx answer means the query was
// invalid and is an error; any other failure is ErrUnavailable.
//
// At most max_inflight_queries queries run at once. A query over that limit is not queued
// but fails at once as unavailable, because a lookup that waits for a slot only delays
// the request it was meant to speed up.
type Remote struct {
	endpoint string
	timeout  time.Duration
	client   *http.Client
	slots    chan struct{}
	engines  map[string]string // normalised URL -> engine id
	sizes    map[string][]int  // model -> distinct block sizes
}

// Defaults of a remote prefix source whose plan leaves them unset.
const (
	DefaultQueryTimeout = 100 * time.Millisecond
	DefaultMaxInflight  = 32
)

// NewRemote returns a client for a remote_indexer prefix source of the plan's engines.
// client nil means http.DefaultClient. Only http and https endpoints are supported.
func NewRemote(src plan.PrefixSource, engines []plan.Engine, client *http.Client) (*Remote, error) {
	u, err := url.Parse(src.Endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("remote prefix indexer endpoint %q is not an absolute URL", src.Endpoint)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("remote prefix indexer endpoint %q: only the HTTP JSON protocol (http:// or https://) is supported, not %s://", src.Endpoint, u.Scheme)
	}
	if client == nil {
		client = http.DefaultClient
	}
	r := &Remote{
		endpoint: strings.TrimSuffix(src.Endpoint, "/") + "/query",
		timeout:  time.Duration(src.QueryTimeoutMS) * time.Millisecond,
		client:   client,
		engines:  map[string]string{},
		sizes:    map[string][]int{},
	}
	if r.timeout <= 0 {
		r.timeout = DefaultQueryTimeout
	}
	n := src.MaxInflightQueries
	if n <= 0 {
		n = DefaultMaxInflight
	}
	r.slots = make(chan struct{}, n)
	for _, e := range engines {
		r.engines[strings.TrimSuffix(e.URL, "/")] = e.ID
		if bs := BlockSize(e); !slices.Contains(r.sizes[e.Model], bs) {
			r.sizes[e.Model] = append(r.sizes[e.Model], bs)
		}
	}
	return r, nil
}

// NewRemotes returns one client per distinct remote_indexer prefix source in the plan's
// policies, so that policies sharing a source share its in-flight limit.
func NewRemotes(p *plan.Plan, client *http.Client) (map[plan.PrefixSource]*Remote, error) {
	out := map[plan.PrefixSource]*Remote{}
	for _, m := range p.Models {
		for _, b := range m.Buckets {
			var groups []plan.Group
			if b.Groups.Plain != nil {
				groups = append(groups, *b.Groups.Plain)
			}
			if b.Groups.PD != nil {
				groups = append(groups, b.Groups.PD.Prefill, b.Groups.PD.Decode)
			}
			for _, g := range groups {
				src := g.Policy.PrefixSource
				if g.Policy.Type != plan.CacheAware || src == nil || src.Type != "remote_indexer" || out[*src] != nil {
					continue
				}
				r, err := NewRemote(*src, p.Engines, client)
				if err != nil {
					return nil, fmt.Errorf("model %s: bucket %s: %w", m.Name, b.ID, err)
				}
				out[*src] = r
			}
		}
	}
	return out, nil
}

// BlockSizes returns the distinct page sizes of the model's engines. The slice must not be
// modified.
func (r *Remote) BlockSizes(model string) []int { return r.sizes[model] }

type query struct {
	Model       string  `json:"model"`
	BlockSize   int     `json:"block_size"`
	BlockHashes []int64 `json:"block_hashes"`
}

type answer struct {
	Matches map[string]int `json:"matches"`
}

// Query asks the indexer which engines hold a prefix of hashes, a request's block hashes
// for the page size. Matches name the plan's engines; Blocks is capped at len(hashes).
func (r *Remote) Query(ctx context.Context, model string, blockSize int, hashes []int64) ([]Match, error) {
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	default:
		return nil, fmt.Errorf("%w: %d queries already in flight", ErrUnavailable, cap(r.slots))
	}
	body, err := json.Marshal(query{Model: model, BlockSize: blockSize, BlockHashes: hashes})
	if err != nil {
		return nil, fmt.Errorf("encoding prefix query: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building prefix query: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: reading answer: %v", ErrUnavailable, err)
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, fmt.Errorf("prefix indexer rejected the query: %s: %s", resp.Status, bytes.TrimSpace(data))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, resp.Status)
	}
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("%w: malformed answer: %v", ErrUnavailable, err)
	}
	var out []Match
	for u, blocks := range a.Matches {
		id, ok := r.engines[strings.TrimSuffix(u, "/")]
		if !ok || blocks <= 0 {
			continue
		}
		out = append(out, Match{Engine: id, Blocks: min(blocks, len(hashes))})
	}
	return out, nil
}
