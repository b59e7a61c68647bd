// Command kvevents measures what indexing KV events costs the router: `router serve` with
// cache_aware over simulated engines whose KV events this program publishes through real
// ZMQ at a fixed rate of stored blocks per second, with no requests, as CPU time of the
// router process. Each rate's figure is set beside the same fleet publishing nothing, so
// the difference is the events' cost; `make bench-kv` runs it at 0, 1 000, 10 000 and
// 50 000 blocks/s (docs/benchmarks.md, "KV-event indexing cost").
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/routerkit/router/bench/proxy"
	"github.com/routerkit/router/runtime/sim"
)

// tick is the time between an engine's batches (-tick): the router's cost has a part per
// message (waking the subscriber) and a part per block.
var tick time.Duration

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-kv:", err)
		os.Exit(1)
	}
}

// Shape of the published traffic. Blocks come in sequences of seqBlocks (512-token
// prompts); each engine holds at most liveBlocks, and once it does every store comes with
// the removal of its oldest block, so the index stays the same size and the rate counts
// both a store and its later removal.
const (
	blockSize  = 16
	seqBlocks  = 32
	liveBlocks = 4096
	vocabulary = 151_000 // a Qwen-sized vocabulary
	// maxBatch bounds the blocks of one batch, well under the router's 4 MiB message
	// bound, for a publisher catching up after it was starved.
	maxBatch = 2000
)

func run() error {
	routerBin := flag.String("router", "bin/router", "router binary")
	rates := flag.String("rates", "1000,10000,50000", "stored blocks per second over the fleet")
	engines := flag.Int("engines", 4, "engines publishing, the rate split among them")
	encoding := flag.String("encoding", "sglang", "sglang: an event per block; vllm: vLLM's map encoding, an event per run of blocks")
	window := flag.Duration("window", 15*time.Second, "time measured per rate")
	flag.DurationVar(&tick, "tick", 10*time.Millisecond, "time between an engine's batches, as its scheduler steps publish them")
	flag.Parse()
	if *encoding != "sglang" && *encoding != "vllm" {
		return fmt.Errorf("unknown encoding %q", *encoding)
	}
	fmt.Printf("encoding %s, %d engines, %d-token blocks in sequences of %d, %d live blocks per engine, a batch per engine every %v\n\n",
		*encoding, *engines, blockSize, seqBlocks, liveBlocks, tick)
	fmt.Println("| blocks/s asked | published | router CPU, % of one core | above idle, % of one core | per block, µs | blocks held at the end | gaps, orphans |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|")
	idle, err := measure(*routerBin, *engines, *encoding, 0, *window)
	if err != nil {
		return err
	}
	fmt.Printf("| 0 | 0 | %.2f | | | %d | %d |\n", idle.pct, idle.held, idle.lost)
	for _, s := range strings.Split(*rates, ",") {
		rate, err := strconv.Atoi(s)
		if err != nil || rate <= 0 {
			return fmt.Errorf("bad rate %q", s)
		}
		r, err := measure(*routerBin, *engines, *encoding, rate, *window)
		if err != nil {
			return err
		}
		above := r.pct - idle.pct
		fmt.Printf("| %d | %.0f | %.2f | %.2f | %.2f | %d | %d |\n", rate, r.published, r.pct, above, above/100*1e6/r.published, r.held, r.lost)
	}
	return nil
}

// result is one rate's measurement: the router's CPU in % of a core, the blocks stored
// per second the publishers achieved over the window (a starved publisher falls short
// of the rate asked), the blocks the router's index holds at the end, and the gaps and
// orphan blocks it counted (events it lost).
type result struct {
	pct, published float64
	held, lost     int
}

// measure starts the engines, their publishers and a router over them, publishes at rate
// blocks/s, and reads the router's CPU over window after a warm-up that fills the index.
func measure(routerBin string, n int, encoding string, rate int, window time.Duration) (result, error) {
	cfg := sim.DefaultConfig()
	cfg.TimeScale = 0
	fleet, err := sim.Start(context.Background(), sim.PlainSGLang(n, "m", cfg, nil))
	if err != nil {
		return result{}, err
	}
	defer fleet.Close()
	var urls, endpoints []string
	var pubs []*publisher
	defer func() {
		for _, p := range pubs {
			p.sock.Close()
		}
	}()
	for i, e := range fleet.Engines() {
		urls = append(urls, e.URL())
		p, err := newPublisher(i, encoding == "vllm")
		if err != nil {
			return result{}, err
		}
		pubs = append(pubs, p)
		endpoints = append(endpoints, p.endpoint)
	}
	dir, err := os.MkdirTemp("", "bench-kv-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	t, err := proxy.StartRouter(routerBin, "router", dir, "cache_aware", "", urls, endpoints)
	if err != nil {
		return result{}, err
	}
	defer t.Stop()
	time.Sleep(2 * time.Second) // start-up and the subscriptions' connections
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var pubErr error
	var errOnce sync.Once
	perEngine := float64(rate) / float64(n)
	for _, p := range pubs {
		wg.Go(func() {
			if err := p.run(ctx, perEngine); err != nil {
				errOnce.Do(func() { pubErr = err })
			}
		})
	}
	// Warm up until the engines hold their live blocks (at low rates, a few seconds).
	warm := 3 * time.Second
	if rate > 0 {
		warm = max(warm, min(30*time.Second, time.Duration(float64(liveBlocks*n)/float64(rate)*float64(time.Second))))
	}
	time.Sleep(warm)
	published := func() (n int64) {
		for _, p := range pubs {
			n += p.stored.Load()
		}
		return n
	}
	c0, err := proxy.ProcessCPU(t.PID())
	if err != nil {
		stop()
		wg.Wait()
		return result{}, err
	}
	start, p0 := time.Now(), published()
	time.Sleep(window)
	c1, err := proxy.ProcessCPU(t.PID())
	elapsed, p1 := time.Since(start), published()
	stop()
	wg.Wait()
	if err != nil {
		return result{}, err
	}
	if pubErr != nil {
		return result{}, pubErr
	}
	time.Sleep(200 * time.Millisecond) // the last batches reach the index
	held, lost, err := indexState(t.URL)
	return result{pct: 100 * float64(c1-c0) / float64(elapsed), published: float64(p1-p0) / elapsed.Seconds(), held: held, lost: lost}, err
}

// indexState sums, over the router's engines, the blocks its index holds and the event
// gaps and orphan blocks it counted, from its /metrics.
func indexState(routerURL string) (held, lost int, err error) {
	resp, err := http.Get(routerURL + "/metrics")
	if err != nil {
		return 0, 0, fmt.Errorf("reading the router's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		switch {
		case strings.HasPrefix(line, "router_kv_blocks{"):
			held += int(v)
		case strings.HasPrefix(line, "router_kv_event_gaps_total{"),
			strings.HasPrefix(line, "router_kv_events_discarded_total{") && strings.Contains(line, `reason="orphan"`):
			lost += int(v)
		}
	}
	return held, lost, sc.Err()
}

// publisher is one engine's PUB socket and the blocks it has stored.
type publisher struct {
	sock     zmq4.Socket
	endpoint string
	topic    []byte
	vllm     bool
	seq      uint64  // the next batch's sequence number
	next     int64   // the next block's hash
	token    uint32  // the next block's first token
	inSeq    int     // blocks of the current sequence so far
	live     []int64 // held blocks, oldest first
	stored   atomic.Int64
}

func newPublisher(engine int, vllm bool) (*publisher, error) {
	sock := zmq4.NewPub(context.Background())
	if err := sock.Listen("tcp://127.0.0.1:0"); err != nil {
		sock.Close()
		return nil, fmt.Errorf("kv publisher: %w", err)
	}
	return &publisher{sock: sock, endpoint: "tcp://" + sock.Addr().String(), topic: fmt.Appendf(nil, "kv@E%d@m", engine+1),
		vllm: vllm, next: int64(engine+1) << 40, token: uint32(engine * 7919)}, nil
}

// run publishes a batch every tick until ctx ends, with the blocks owed to rate (blocks
// per second) since it started, so a late tick is made up by the next.
func (p *publisher) run(ctx context.Context, rate float64) error {
	tk := time.NewTicker(tick)
	defer tk.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
		}
		n := min(int(rate*time.Since(start).Seconds())-int(p.stored.Load()), maxBatch)
		if n <= 0 {
			continue
		}
		payload, err := p.batch(n)
		if err != nil {
			return err
		}
		msg := zmq4.NewMsgFrom(p.topic, binary.BigEndian.AppendUint64(nil, p.seq), payload)
		p.seq++
		if err := p.sock.Send(msg); err != nil {
			return fmt.Errorf("publishing: %w", err)
		}
		p.stored.Add(int64(n))
	}
}

// batch encodes n new blocks and the removals that keep the engine at liveBlocks, as
// SGLang (positional events, one per block) or vLLM (map events, one store per run of a
// sequence's blocks, one removal per block) publishes them.
func (p *publisher) batch(n int) ([]byte, error) {
	var events []any
	var run map[string]any // vLLM: the store of the current sequence's blocks in this batch
	for range n {
		if p.inSeq == seqBlocks {
			p.inSeq, run = 0, nil
		}
		var parent any
		if p.inSeq > 0 {
			parent = p.next - 1
		}
		toks := make([]uint32, blockSize)
		for i := range toks {
			toks[i] = p.token % vocabulary
			p.token++
		}
		h := p.next
		p.next++
		p.inSeq++
		p.live = append(p.live, h)
		switch {
		case !p.vllm:
			events = append(events, []any{"BlockStored", []int64{h}, parent, toks, blockSize, nil, "GPU"})
		case run != nil:
			run["block_hashes"] = append(run["block_hashes"].([]int64), h)
			run["token_ids"] = append(run["token_ids"].([]uint32), toks...)
			run["extra_keys"] = append(run["extra_keys"].([]any), nil)
		default:
			run = map[string]any{"type": "BlockStored", "block_hashes": []int64{h}, "parent_block_hash": parent,
				"token_ids": toks, "block_size": blockSize, "lora_id": nil, "medium": "GPU", "lora_name": nil,
				"extra_keys": []any{nil}, "group_idx": 0, "kv_cache_spec_kind": "full_attention"}
			events = append(events, run)
		}
	}
	for len(p.live) > liveBlocks {
		h := p.live[0]
		p.live = p.live[1:]
		if p.vllm {
			events = append(events, map[string]any{"type": "BlockRemoved", "block_hashes": []int64{h}, "medium": "GPU", "group_idx": 0})
		} else {
			events = append(events, []any{"BlockRemoved", []int64{h}, "GPU"})
		}
	}
	ts := float64(time.Now().UnixNano()) / 1e9
	var batch any = []any{ts, events, 0}
	if p.vllm {
		batch = map[string]any{"ts": ts, "events": events, "data_parallel_rank": 0}
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(batch); err != nil {
		return nil, fmt.Errorf("encoding a batch: %w", err)
	}
	return buf.Bytes(), nil
}
