package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/token"
)

// testConfig is a small engine with round numbers: 16-token blocks, 1 ms per prefill
// token, 10 ms prefill overhead, 5 ms decode steps growing 10% per extra request.
func testConfig() Config {
	return Config{
		MaxRunningRequests: 4,
		MaxPrefillTokens:   1024,
		KVCapacityTokens:   1024,
		ContextLength:      512,
		BlockSize:          16,
		OutputTokens:       4,
		PrefillOverhead:    10 * time.Millisecond,
		PrefillPerToken:    time.Millisecond,
		DecodePerToken:     5 * time.Millisecond,
		DecodeBatchFactor:  0.1,
		TransferPerToken:   time.Microsecond,
		TimeScale:          1,
	}
}

// prompt returns n distinct token ids starting at base, so prompts with different bases
// share no block.
func prompt(base uint32, n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = base + uint32(i)
	}
	return ids
}

func newReq(cfg Config, ids []uint32, maxOut int) *request {
	return newRequest(ids, token.BlockHashes(ids, cfg.BlockSize), maxOut, false)
}

// drain runs the model until it is idle and returns the simulated time it took.
func drain(t *testing.T, m *model) time.Duration {
	t.Helper()
	var total time.Duration
	for range 10000 {
		s := m.next()
		if s.kind == idle {
			return total
		}
		total += s.dur
		m.finish(s)
	}
	t.Fatal("model did not become idle")
	return 0
}

func TestQueueingIsFIFOAndBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRunningRequests = 2
	m := newModel(cfg, true)
	reqs := []*request{newReq(cfg, prompt(0, 20), 2), newReq(cfg, prompt(100, 20), 2), newReq(cfg, prompt(200, 20), 2)}
	for _, r := range reqs {
		m.enqueue(r)
	}
	s := m.next()
	if s.kind != prefill || !slices.Equal(s.reqs, reqs[:2]) {
		t.Fatalf("first step = %v with %d requests, want prefill of the first two", s.kind, len(s.reqs))
	}
	if l := m.load(); l.Running != 2 || l.Waiting != 1 {
		t.Fatalf("running %d waiting %d, want 2 and 1", l.Running, l.Waiting)
	}
	m.finish(s)
	s = m.next()
	if s.kind != decode || len(s.reqs) != 2 {
		t.Fatalf("second step = %v with %d requests, want a decode of 2: the third must wait for a slot", s.kind, len(s.reqs))
	}
	m.finish(s) // both reach 2 tokens and finish
	s = m.next()
	if s.kind != prefill || !slices.Equal(s.reqs, reqs[2:]) {
		t.Fatalf("third step = %v, want the prefill of the waiting request", s.kind)
	}
}

func TestPrefillBatchTokenBudget(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPrefillTokens = 50
	m := newModel(cfg, true)
	m.enqueue(newReq(cfg, prompt(0, 30), 1))
	m.enqueue(newReq(cfg, prompt(100, 30), 1))
	if s := m.next(); len(s.reqs) != 1 {
		t.Fatalf("prefill batch of %d requests exceeds the 50-token budget", len(s.reqs))
	}
}

func TestCacheHitShortensPrefill(t *testing.T) {
	cfg := testConfig()
	m := newModel(cfg, true)
	first := newReq(cfg, prompt(0, 70), 1)
	m.enqueue(first)
	s := m.next()
	if want := cfg.PrefillOverhead + 70*cfg.PrefillPerToken; s.dur != want {
		t.Fatalf("cold prefill took %v, want %v", s.dur, want)
	}
	m.finish(s)

	// The same 70 tokens plus 30 more: the 4 full blocks (64 tokens) are cached.
	second := newReq(cfg, append(prompt(0, 70), prompt(1000, 30)...), 1)
	m.enqueue(second)
	s = m.next()
	if want := cfg.PrefillOverhead + 36*cfg.PrefillPerToken; s.dur != want {
		t.Fatalf("warm prefill took %v, want %v (64 of 100 tokens cached)", s.dur, want)
	}
	m.finish(s)
	if second.cached != 64 || first.cached != 0 {
		t.Fatalf("cached tokens: first %d second %d, want 0 and 64", first.cached, second.cached)
	}
	if l := m.load(); l.cacheHitRate() != 64.0/170.0 {
		t.Fatalf("cache hit rate %v, want %v", l.cacheHitRate(), 64.0/170.0)
	}
}

func TestBlocksStoredOncePerBatch(t *testing.T) {
	cfg := testConfig()
	m := newModel(cfg, true)
	ids := prompt(0, 40)
	a, b := newReq(cfg, ids, 1), newReq(cfg, ids, 1)
	m.enqueue(a)
	m.enqueue(b)
	s := m.next()
	if len(s.reqs) != 2 || s.dur != cfg.PrefillOverhead+80*cfg.PrefillPerToken {
		t.Fatalf("two identical cold prompts in one batch: %d requests, %v; both must pay", len(s.reqs), s.dur)
	}
	m.finish(s)
	events := m.takeEvents()
	hashes := token.BlockHashes(ids, cfg.BlockSize)
	if len(events) != 2 || events[0].hash != hashes[0] || events[1].hash != hashes[1] {
		t.Fatalf("got %d events, want one BlockStored per block: %+v", len(events), events)
	}
	if events[0].hasParent || !events[1].hasParent || events[1].parent != hashes[0] {
		t.Fatal("parent hashes do not chain")
	}
	if !slices.Equal(events[1].tokens, ids[16:32]) {
		t.Fatalf("block 1 tokens = %v", events[1].tokens)
	}
	if m.cache.size != 32 {
		t.Fatalf("cache holds %d tokens, want 32", m.cache.size)
	}
}

func TestEvictionIsLRUAndLeafFirst(t *testing.T) {
	cfg := testConfig()
	cfg.KVCapacityTokens, cfg.ContextLength, cfg.MaxRunningRequests = 96, 64, 1
	m := newModel(cfg, true)
	a, b, c := prompt(0, 32), prompt(100, 32), prompt(200, 32)
	for _, ids := range [][]uint32{a, b, a} { // a is used last
		m.enqueue(newReq(cfg, ids, 1))
		drain(t, m)
	}
	m.takeEvents()
	if m.cache.size != 64 {
		t.Fatalf("cache holds %d tokens, want 64", m.cache.size)
	}

	// c needs 32 input + 1 output tokens; 32 are free, so one block must go: b's leaf,
	// the least recently used block without children.
	m.enqueue(newReq(cfg, c, 1))
	drain(t, m)
	bHashes := token.BlockHashes(b, cfg.BlockSize)
	var removed []int64
	for _, e := range m.takeEvents() {
		if e.kind == blockRemoved {
			removed = append(removed, e.hash)
		}
	}
	if !slices.Equal(removed, bHashes[1:]) {
		t.Fatalf("evicted %v, want b's second block %v", removed, bHashes[1:])
	}
	if got := m.cache.matchLen(token.BlockHashes(a, cfg.BlockSize)); got != 2 {
		t.Fatalf("a keeps %d cached blocks, want 2", got)
	}
	if got := m.cache.matchLen(bHashes); got != 1 {
		t.Fatalf("b keeps %d cached blocks, want 1", got)
	}
}

func TestKVCapacityHoldsBackAdmission(t *testing.T) {
	cfg := testConfig()
	cfg.KVCapacityTokens, cfg.ContextLength = 64, 64
	m := newModel(cfg, true)
	first, second := newReq(cfg, prompt(0, 40), 10), newReq(cfg, prompt(100, 8), 10)
	m.enqueue(first)
	m.enqueue(second)
	s := m.next()
	if len(s.reqs) != 1 {
		t.Fatalf("admitted %d requests; the second (18 tokens) does not fit next to the first (50 of 64)", len(s.reqs))
	}
	if l := m.load(); l.Waiting != 1 || l.WaitingUncachedTokens != 8 {
		t.Fatalf("waiting %d with %d uncached tokens, want 1 and 8", l.Waiting, l.WaitingUncachedTokens)
	}
	m.finish(s)
	drain(t, m)
	if !first.done || !second.done || second.generated != 10 {
		t.Fatal("the second request did not run after the first released its KV")
	}
	if m.private != 0 {
		t.Fatalf("%d private tokens leaked", m.private)
	}
}

func TestDecodeSlowsWithBatchSize(t *testing.T) {
	cfg := testConfig()
	stepTime := func(n int) time.Duration {
		m := newModel(cfg, true)
		for i := range n {
			m.enqueue(newReq(cfg, prompt(uint32(i*100), 16), 4))
		}
		m.finish(m.next())
		s := m.next()
		if s.kind != decode || len(s.reqs) != n {
			t.Fatalf("want a decode step of %d requests, got %v of %d", n, s.kind, len(s.reqs))
		}
		return s.dur
	}
	if one, four := stepTime(1), stepTime(4); one != 5*time.Millisecond || four != 6500*time.Microsecond {
		t.Fatalf("decode step: batch 1 %v, batch 4 %v; want 5ms and 6.5ms", one, four)
	}
}

func TestAbortReleasesEverything(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRunningRequests = 1
	m := newModel(cfg, true)
	running, waiting := newReq(cfg, prompt(0, 40), 100), newReq(cfg, prompt(100, 40), 100)
	m.enqueue(running)
	m.enqueue(waiting)
	m.finish(m.next())
	m.abort(waiting)
	if !waiting.done || m.load().Waiting != 0 {
		t.Fatal("aborting a waiting request must remove it at once")
	}
	m.abort(running)
	drain(t, m)
	if !running.done || m.private != 0 || m.cache.evictable != m.cache.size {
		t.Fatalf("aborted request still holds KV: private %d, locked %d", m.private, m.cache.size-m.cache.evictable)
	}
	if running.generated >= running.maxOut {
		t.Fatal("aborted request ran to completion")
	}
}

func TestLoadCountsUsedTokens(t *testing.T) {
	cfg := testConfig()
	m := newModel(cfg, true)
	r := newReq(cfg, prompt(0, 40), 4)
	m.enqueue(r)
	if l := m.load(); l.UsedTokens != 0 || l.totalTokens() != 40 {
		t.Fatalf("queued: used %d total %d, want 0 and 40", l.UsedTokens, l.totalTokens())
	}
	m.finish(m.next()) // prefill: 32 tokens into the cache, 8 private, 1 generated
	if l := m.load(); l.UsedTokens != 41 || l.CachedTokens != 32 {
		t.Fatalf("after prefill: used %d cached %d, want 41 and 32", l.UsedTokens, l.CachedTokens)
	}
	drain(t, m)
	if l := m.load(); l.UsedTokens != 0 {
		t.Fatalf("idle: used %d, want 0 (cached blocks are evictable, not used)", l.UsedTokens)
	}
}

func TestFlushOnlyWhenIdle(t *testing.T) {
	cfg := testConfig()
	m := newModel(cfg, true)
	m.enqueue(newReq(cfg, prompt(0, 32), 1))
	if m.flush() {
		t.Fatal("flushed with a request waiting")
	}
	drain(t, m)
	m.takeEvents()
	if !m.flush() || m.cache.size != 0 {
		t.Fatal("idle flush did not empty the cache")
	}
	if ev := m.takeEvents(); len(ev) != 1 || ev[0].kind != allBlocksCleared {
		t.Fatalf("flush events = %+v, want one AllBlocksCleared", ev)
	}
}

func TestTransferredRequestsSkipCacheAndPrefill(t *testing.T) {
	cfg := testConfig()
	m := newModel(cfg, false)
	r := newRequest(prompt(0, 100), nil, 2, true)
	m.enqueue(r)
	s := m.next()
	if want := cfg.PrefillOverhead + 100*cfg.TransferPerToken; s.dur != want {
		t.Fatalf("transfer step took %v, want %v", s.dur, want)
	}
	m.finish(s)
	drain(t, m)
	if len(m.takeEvents()) != 0 || r.generated != 2 {
		t.Fatal("a decode engine must generate without caching")
	}
}
