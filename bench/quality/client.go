package quality

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/slo"
)

// Outcome is what one request saw.
type Outcome struct {
	Class string
	// TTFTSLOMS is the request's TTFT target, 0 when it had none.
	TTFTSLOMS float64
	// Sent is when the request went out, from the start of the run.
	Sent, TTFT, E2E time.Duration
	// PromptTokens and CachedTokens are the engine's usage report.
	PromptTokens, CachedTokens, OutputTokens int
	Err                                      error
}

// Send runs the requests against url at their arrival times, a conversation's turn no
// earlier than the previous turn's answer, and returns one outcome per request in order.
func Send(ctx context.Context, client *http.Client, url string, reqs []Request) []Outcome {
	out := make([]Outcome, len(reqs))
	prev := map[string]chan struct{}{}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range reqs {
		r := &reqs[i]
		var wait chan struct{}
		done := make(chan struct{})
		if r.Conv != "" {
			wait = prev[r.Conv]
			prev[r.Conv] = done
		}
		if d := time.Until(start.Add(r.At)); d > 0 {
			select {
			case <-ctx.Done():
				return out
			case <-time.After(d):
			}
		}
		wg.Go(func() {
			defer close(done)
			if wait != nil {
				<-wait
			}
			out[i] = send(ctx, client, url, r)
			out[i].Sent = time.Since(start) - out[i].E2E
		})
	}
	wg.Wait()
	return out
}

type chatBody struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	MaxTokens     int       `json:"max_tokens"`
	Stream        bool      `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type usageChunk struct {
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// send streams one chat completion: TTFT is the first event (the simulator, like SGLang,
// sends nothing before prefill ends), the usage comes from the last chunk.
func send(ctx context.Context, client *http.Client, url string, r *Request) Outcome {
	o := Outcome{Class: r.Class, TTFTSLOMS: r.TTFTSLOMS}
	body := chatBody{Model: "m", Messages: r.Messages, MaxTokens: r.MaxTokens, Stream: true}
	body.StreamOptions.IncludeUsage = true
	data, err := json.Marshal(body)
	if err != nil {
		o.Err = err
		return o
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(data))
	if err != nil {
		o.Err = err
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	if r.TTFTSLOMS > 0 {
		req.Header.Set(slo.TTFTHeader, strconv.FormatFloat(r.TTFTSLOMS, 'f', -1, 64))
	}
	if r.Conv != "" {
		req.Header.Set("X-Session-Id", r.Conv)
		req.Header.Set("X-Sgl-Routing-Key", r.Conv)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		o.Err = err
		return o
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		o.Err = fmt.Errorf("status %d", resp.StatusCode)
		return o
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		if o.TTFT == 0 {
			o.TTFT = time.Since(t0)
		}
		if bytes.Contains(line, []byte(`"usage"`)) {
			var c usageChunk
			if json.Unmarshal(line[len("data: "):], &c) == nil && c.Usage != nil {
				o.PromptTokens, o.OutputTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
				if d := c.Usage.PromptTokensDetails; d != nil {
					o.CachedTokens = d.CachedTokens
				}
			}
		}
	}
	o.E2E = time.Since(t0)
	if err := sc.Err(); err != nil {
		o.Err = fmt.Errorf("reading the stream: %w", err)
	} else if o.PromptTokens == 0 {
		o.Err = fmt.Errorf("stream ended without usage")
	}
	return o
}

// newClient returns the benchmark's HTTP client: enough idle connections for every
// request in flight, and a bound on one request far above any run's.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxIdleConns: 512}, Timeout: 5 * time.Minute}
}
