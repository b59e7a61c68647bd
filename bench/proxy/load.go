package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one trial: n requests through one target at one concurrency.
type Result struct {
	Requests int
	Elapsed  time.Duration
	// P50 and P99 are the request latencies, to the end of the body.
	P50, P99 time.Duration
	// CPU is what the target's process used during the trial; 0 for direct.
	CPU time.Duration
	// Errors counts failed requests; their latencies are left out.
	Errors int
}

// Kind is a kind of request: its name in the report and its body.
type Kind struct {
	Name string
	Body []byte
	// Next, when set, returns each request's body in place of Body (see Grow).
	Next func() []byte
}

// The short request kinds: a short chat answered with one token as JSON, and the same chat
// streamed with 16 tokens.
var (
	JSON   = Kind{Name: "json", Body: []byte(`{"model":"m","messages":[{"role":"user","content":"Benchmark the router with a short prompt."}],"max_tokens":1}`)}
	Stream = Kind{Name: "stream", Body: []byte(`{"model":"m","messages":[{"role":"user","content":"Benchmark the router with a short prompt."}],"max_tokens":16,"stream":true}`)}
)

// Long returns the kind "long": a conversation of turns of prose, about bytes long in
// all, answered with one token as JSON. Every request sends the same body, so a router
// with a token cache has seen its history before, as it has a conversation's earlier
// turns. English prose is about 4.7 bytes a token for Qwen3 and 5 for the stand-in
// vocabulary, so 620 kB is about 128k tokens.
func Long(prose []byte, bytes int) Kind {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var msgs []msg
	for i, n := 0, 0; n < bytes; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		// Each turn differs, as a conversation's do, by its first words.
		m := msg{role, fmt.Sprintf("Turn %d. %s", i, prose)}
		msgs, n = append(msgs, m), n+len(m.Content)
	}
	if msgs[len(msgs)-1].Role != "user" {
		msgs = append(msgs, msg{"user", "And now?"})
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "max_tokens": 1})
	return Kind{Name: "long", Body: body}
}

// Trial sends n requests to url from conc clients, stopping early after limit, and
// returns their latencies. pid, when positive, is the process whose CPU is measured. A
// failed request is counted and the trial goes on; more than 1% failures fail the trial.
func Trial(client *http.Client, url string, kind Kind, conc, n int, limit time.Duration, pid int) (Result, error) {
	body := kind.Body
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var errs atomic.Int64
	deadline := time.Now().Add(limit)
	cpu0, err := cpuOf(pid)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil || time.Now().After(deadline) {
					return
				}
				b := body
				if kind.Next != nil {
					b = kind.Next()
				}
				t0 := time.Now()
				if err := do(client, url, b); err != nil {
					if errs.Add(1) > int64(n/100) {
						failed.CompareAndSwap(nil, &err)
						return
					}
					continue
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := cpuOf(pid)
	if err != nil {
		return Result{}, err
	}
	if e := failed.Load(); e != nil {
		return Result{}, *e
	}
	done := lat[:min(n, int(next.Load()))]
	done = slices.DeleteFunc(done, func(d time.Duration) bool { return d == 0 })
	if len(done) == 0 {
		return Result{}, fmt.Errorf("no request finished within %v", limit)
	}
	slices.Sort(done)
	return Result{Requests: len(done), Elapsed: elapsed, P50: done[len(done)/2], P99: done[len(done)*99/100], CPU: cpu1 - cpu0, Errors: int(errs.Load())}, nil
}

func cpuOf(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	return ProcessCPU(pid)
}

func do(client *http.Client, url string, body []byte) error {
	resp, err := client.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// AtOnce runs one trial per target at the same time, each with its own conc clients, for
// the time given, and returns their results in order. Since the trials share the machine
// for the same window, a slow spell of the host or a busy core weighs on all of them
// alike: the ratio of their CPU per request moves by a few percent from round to round,
// where trials run one after the other move by up to ±20% on a shared VM.
func AtOnce(client *http.Client, targets []*Target, kind Kind, conc int, d time.Duration) ([]Result, error) {
	return atOnce(targets, func(t *Target) (Result, error) {
		// Enough requests (100 000 a second) that the time runs out first.
		return Trial(client, t.URL, kind, conc, int(d.Seconds()*100_000), d, t.PID())
	})
}

// atOnce runs trial for every target at the same time and returns their results in
// order, or the first target's error.
func atOnce(targets []*Target, trial func(*Target) (Result, error)) ([]Result, error) {
	res := make([]Result, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { res[i], errs[i] = trial(t) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", targets[i].Name, err)
		}
	}
	return res, nil
}
