package sim

import (
	"slices"
	"time"
)

// request is one generation inside a rank's model. The HTTP handler fills the first block
// of fields; the model owns the rest, under the rank's lock.
type request struct {
	ids []uint32
	// hashes are the block hashes of the prompt's full blocks; nil when the rank does not
	// cache (a decode engine receives its KV from prefill instead).
	hashes []int64
	maxOut int
	// transferred marks a decode engine's request: its input KV is copied from the
	// prefill peer instead of computed, and it does not enter the prefix cache.
	transferred bool
	// notify is signalled (without blocking) whenever generated or done changes.
	notify chan struct{}

	cached    int      // input tokens found in the prefix cache at admission
	locked    []*block // cache path the request pins: matched blocks, then inserted ones
	private   int      // KV tokens reserved outside the cache: uncached input and output budget
	generated int
	prefilled bool
	done      bool
	aborted   bool
}

func newRequest(ids []uint32, hashes []int64, maxOut int, transferred bool) *request {
	return &request{ids: ids, hashes: hashes, maxOut: maxOut, transferred: transferred, notify: make(chan struct{}, 1)}
}

func (r *request) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// stepKind is what a rank does in one scheduler iteration.
type stepKind uint8

const (
	idle stepKind = iota
	prefill
	decode
)

// step is one scheduler iteration: a batch and how long it takes in simulated time.
type step struct {
	kind stepKind
	reqs []*request
	dur  time.Duration
}

// model is the continuous-batching scheduler of one data-parallel rank. It is a pure
// state machine: next picks the next batch and its duration, finish applies its effects.
// The runner sleeps in between; tests call both directly with no clock at all.
//
// Like SGLang's scheduler, it prefers a prefill batch of newly admitted requests whenever
// the head of the FIFO queue can be admitted, and otherwise runs one decode step for every
// running request. model is not safe for concurrent use.
type model struct {
	cfg     Config
	cache   *prefixCache // nil when the rank does not cache
	waiting []*request
	running []*request // admitted, prefilled or not
	// private sums the running requests' private reservations.
	private int
	// events collects KV events until the runner publishes them.
	events []kvEvent
	stats  counters
}

// counters are the cumulative and recent figures that load reports and metrics expose.
type counters struct {
	requests, promptTokens, cachedTokens, generatedTokens int64
	// throughput is the output tokens per simulated second of the last step.
	throughput float64
}

func newModel(cfg Config, caching bool) *model {
	m := &model{cfg: cfg}
	if caching {
		m.cache = newPrefixCache(cfg.BlockSize, func(e kvEvent) { m.events = append(m.events, e) })
	}
	return m
}

// enqueue adds a request at the back of the waiting queue.
func (m *model) enqueue(r *request) {
	m.waiting = append(m.waiting, r)
	m.stats.requests++
}

// abort drops a request, wherever it is, at the next safe point: at once when it waits,
// at the end of the current step when it runs.
func (m *model) abort(r *request) {
	if r.done {
		return
	}
	r.aborted = true
	if i := slices.Index(m.waiting, r); i >= 0 {
		m.waiting = slices.Delete(m.waiting, i, i+1)
		r.done = true
		r.signal()
	}
}

// next chooses the next step and moves the requests it admits from waiting to running.
func (m *model) next() step {
	s := step{kind: prefill}
	budget := m.cfg.MaxPrefillTokens
	for len(m.waiting) > 0 && len(m.running) < m.cfg.MaxRunningRequests {
		r := m.waiting[0]
		uncached := m.uncached(r)
		if len(s.reqs) > 0 && uncached > budget {
			break
		}
		if !m.admit(r) {
			break // FIFO: a request that does not fit holds back the ones behind it
		}
		budget -= uncached
		m.waiting = m.waiting[1:]
		m.running = append(m.running, r)
		s.reqs = append(s.reqs, r)
		if r.transferred {
			s.dur += time.Duration(len(r.ids)) * m.cfg.TransferPerToken
		} else {
			s.dur += time.Duration(len(r.ids)-r.cached) * m.cfg.PrefillPerToken
		}
	}
	if len(s.reqs) > 0 {
		s.dur += m.cfg.PrefillOverhead
		return s
	}
	for _, r := range m.running {
		if r.prefilled {
			s.reqs = append(s.reqs, r)
		}
	}
	if len(s.reqs) == 0 {
		m.stats.throughput = 0
		return step{kind: idle}
	}
	n := float64(len(s.reqs))
	return step{kind: decode, reqs: s.reqs, dur: time.Duration(float64(m.cfg.DecodePerToken) * (1 + m.cfg.DecodeBatchFactor*(n-1)))}
}

// finish applies a step: prefilled requests enter the cache and get their first token,
// decoded ones get one more; finished and aborted requests release their KV.
func (m *model) finish(s step) {
	produced := 0
	for _, r := range s.reqs {
		if r.aborted {
			m.release(r)
			continue
		}
		if s.kind == prefill {
			m.insertPrompt(r)
			r.prefilled = true
		}
		r.generated++
		produced++
		if r.generated >= r.maxOut {
			m.release(r)
		}
		r.signal()
	}
	m.stats.generatedTokens += int64(produced)
	m.stats.throughput = 0
	if s.dur > 0 {
		m.stats.throughput = float64(produced) / s.dur.Seconds()
	}
	m.running = slices.DeleteFunc(m.running, func(r *request) bool { return r.done })
}

// uncached returns how many of r's input tokens would need computing if admitted now.
func (m *model) uncached(r *request) int {
	if r.transferred || m.cache == nil {
		return len(r.ids)
	}
	return len(r.ids) - m.cache.matchLen(r.hashes)*m.cfg.BlockSize
}

// admit pins r's cached prefix and reserves KV for the rest of its input and its whole
// output budget, evicting unused blocks if needed. It reports false, changing nothing
// but possibly the cache, when r does not fit.
func (m *model) admit(r *request) bool {
	var path []*block
	if !r.transferred && m.cache != nil {
		path = m.cache.match(r.hashes)
		m.cache.lock(path)
	}
	cached := len(path) * m.cfg.BlockSize
	need := len(r.ids) - cached + r.maxOut
	if !m.reserve(need) {
		if m.cache != nil {
			m.cache.unlock(path)
		}
		return false
	}
	r.locked, r.cached, r.private = path, cached, need
	m.private += need
	m.stats.promptTokens += int64(len(r.ids))
	m.stats.cachedTokens += int64(cached)
	return true
}

// reserve makes room for n more private tokens, evicting cached blocks if that suffices.
func (m *model) reserve(n int) bool {
	free := m.cfg.KVCapacityTokens - m.private
	if m.cache == nil {
		return free >= n
	}
	free -= m.cache.size
	if free+m.cache.evictable < n {
		return false
	}
	if free < n {
		m.cache.evict(n - free)
	}
	return true
}

// insertPrompt moves the full blocks of r's prompt that are not cached yet from r's private
// reservation into the prefix cache.
func (m *model) insertPrompt(r *request) {
	if r.transferred || m.cache == nil {
		return
	}
	bs := m.cfg.BlockSize
	var parent *block
	if len(r.locked) > 0 {
		parent = r.locked[len(r.locked)-1]
	}
	for i := len(r.locked); i < len(r.hashes); i++ {
		parent = m.cache.insert(parent, r.hashes[i], r.ids[i*bs:(i+1)*bs])
		r.locked = append(r.locked, parent)
		r.private -= bs
		m.private -= bs
	}
}

// release frees everything r holds and marks it done.
func (m *model) release(r *request) {
	if m.cache != nil {
		m.cache.unlock(r.locked)
	}
	m.private -= r.private
	r.locked, r.private, r.done = nil, 0, true
	r.signal()
}

// flush empties the prefix cache, as SGLang's /flush_cache does, only when the rank is idle.
func (m *model) flush() bool {
	if len(m.waiting) > 0 || len(m.running) > 0 {
		return false
	}
	if m.cache != nil {
		m.cache.clear()
	}
	return true
}

// takeEvents returns and forgets the KV events collected since the last call.
func (m *model) takeEvents() []kvEvent {
	ev := m.events
	m.events = nil
	return ev
}

// load is one rank's load report, as the HTTP endpoints expose it.
type load struct {
	Running, Waiting      int
	TransferWaiting       int // decode requests waiting for their prefill; set by the engine
	WaitingUncachedTokens int
	WaitingInputTokens    int
	// UsedTokens is KV in use: locked cache blocks plus running requests' uncached input
	// and the output they have generated so far (not their whole reservation).
	UsedTokens, CapacityTokens, MaxRunning int
	CachedTokens                           int
	counters
}

func (m *model) load() load {
	l := load{
		Running: len(m.running), Waiting: len(m.waiting),
		CapacityTokens: m.cfg.KVCapacityTokens, MaxRunning: m.cfg.MaxRunningRequests,
		counters: m.stats,
	}
	for _, r := range m.waiting {
		l.WaitingInputTokens += len(r.ids)
		l.WaitingUncachedTokens += m.uncached(r)
	}
	for _, r := range m.running {
		l.UsedTokens += r.private - (r.maxOut - r.generated)
	}
	if m.cache != nil {
		l.UsedTokens += m.cache.size - m.cache.evictable
		l.CachedTokens = m.cache.size
	}
	return l
}
