package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/decision"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/load"
)

// fakeSource is a CacheSource with a scripted answer that counts its lookups. It is a
// pointer type, so that it is comparable as the memo requires.
type fakeSource struct {
	res   PrefixResult
	err   error
	calls int
}

func (s *fakeSource) Name() string { return "fake" }

func (s *fakeSource) Lookup(context.Context, string, []uint32) (PrefixResult, error) {
	s.calls++
	return s.res, s.err
}

// cacheDefaults is a cache-aware attachment with the compiler's defaults.
func cacheDefaults() plan.Policy {
	return plan.Policy{Type: plan.CacheAware, MinMatchedTokens: new(int64(1024)), CandidateMinWorkers: 8, CandidateRatio: 0.05,
		CandidateMaxWorkers: 32, SwitchMarginTokens: new(int64(1024)), MinLoadChoices: 2,
		PressureGuard: &plan.PressureGuard{Enabled: true, AbsThresholdTokens: 1024, RelThreshold: 1.5}}
}

// cacheReq is a 4096-token prefill request with token ids.
func cacheReq() *Request {
	r := request(plan.RolePrefill)
	r.InputTokens = 4096
	r.TokenIDs = make([]uint32, 4096)
	return r
}

// waiting returns a fresh native report with the given queue and waiting uncached tokens.
func waiting(n, uncached int64) load.Sample { return native(1, n, uncached, 0, 1<<20) }

func TestCacheAware(t *testing.T) {
	tests := []struct {
		name     string
		tune     func(p *plan.Policy)
		matched  map[string]int64
		loads    map[string]load.Sample
		inflight map[string]int64
		limits   Limits
		draws    []int
		want     string // engine id; empty when an error is wanted
		reason   string
		wantErr  string // substring of the error
		note     string // substring of some note
	}{
		// 1-2: lookup and hit gates.
		{name: "longest prefix wins", matched: map[string]int64{"A": 2048, "B": 3072, "Z": 4096},
			want: "B", reason: reasonLongestPrefix},
		{name: "holders below min_matched_tokens miss", matched: map[string]int64{"A": 1008},
			tune: func(p *plan.Policy) { p.MinLoadChoices = 8 }, draws: []int{0}, want: "A", reason: reasonMissExact, note: "hit gate: 1 of 1 prefix holders below min_matched_tokens 1024"},
		{name: "ratio gate", tune: func(p *plan.Policy) { p.MinMatchRatio = ptr(0.75) },
			matched: map[string]int64{"A": 2048, "B": 3072}, want: "B", reason: reasonLongestPrefix,
			note: "hit gate: 1 of 2 prefix holders"},
		{name: "ratio gate rejects all", tune: func(p *plan.Policy) { p.MinMatchRatio, p.MinLoadChoices = ptr(0.9), 3 },
			matched: map[string]int64{"B": 3072}, inflight: map[string]int64{"A": 1, "B": 1}, want: "C", reason: reasonMissExact},

		// 3: candidate bounds, ordered by prefix, then pressure.
		{name: "bound keeps the longest prefix only; its rejection is final",
			tune:    func(p *plan.Policy) { p.CandidateMinWorkers, p.CandidateRatio, p.CandidateMaxWorkers = 1, 0.01, 1 },
			matched: map[string]int64{"A": 3072, "B": 2048}, inflight: map[string]int64{"A": 2}, limits: Limits{MaxInflightRequests: 2},
			wantErr: "no admissible prefill engine: prefill engine A rejected", note: "candidate bound: kept 1 of 2"},
		{name: "without the bound the next holder is admitted",
			matched: map[string]int64{"A": 3072, "B": 2048}, inflight: map[string]int64{"A": 2}, limits: Limits{MaxInflightRequests: 2},
			want: "B", reason: reasonLongestPrefix},
		{name: "bound breaks prefix ties by pressure",
			tune:    func(p *plan.Policy) { p.CandidateMinWorkers, p.CandidateMaxWorkers = 1, 1 },
			matched: map[string]int64{"A": 2048, "B": 2048}, loads: map[string]load.Sample{"A": waiting(3, 0), "B": waiting(1, 0)},
			want: "B", reason: reasonLongestPrefix},
		{name: "candidate ratio widens the bound",
			tune:    func(p *plan.Policy) { p.CandidateMinWorkers, p.CandidateRatio, p.CandidateMaxWorkers = 1, 0.5, 4 },
			matched: map[string]int64{"A": 3072, "B": 2048}, inflight: map[string]int64{"A": 2}, limits: Limits{MaxInflightRequests: 2},
			want: "B", reason: reasonLongestPrefix},

		// 4: soft queue gate and saturation.
		{name: "queue gate takes a queued holder out of affinity", tune: func(p *plan.Policy) { p.WorkerQueueLimit = 4 },
			matched: map[string]int64{"A": 3072, "B": 2048}, loads: map[string]load.Sample{"A": waiting(4, 0), "B": waiting(0, 0)},
			want: "B", reason: reasonLongestPrefix, note: "queue gate: A has 4 waiting requests (worker_queue_limit 4)"},
		{name: "queue gate fails open without a fresh report", tune: func(p *plan.Policy) { p.WorkerQueueLimit = 4 },
			matched: map[string]int64{"A": 3072, "B": 2048}, loads: map[string]load.Sample{"B": waiting(0, 0)},
			want: "A", reason: reasonLongestPrefix},
		{name: "every holder gated: load fallback among gate-admitted engines", tune: func(p *plan.Policy) { p.WorkerQueueLimit = 4 },
			matched: map[string]int64{"A": 3072},
			loads:   map[string]load.Sample{"A": waiting(9, 0), "B": waiting(5, 0), "C": waiting(3, 0)},
			want:    "C", reason: reasonMissExact, note: "load fallback: 1 of 3 candidates are under worker_queue_limit"},
		{name: "saturation pins the least-pressured holder", tune: func(p *plan.Policy) { p.WorkerQueueLimit, p.SaturationQueueFloor = 4, 2 },
			matched: map[string]int64{"A": 3072, "B": 2048},
			loads:   map[string]load.Sample{"A": waiting(7, 0), "B": waiting(5, 0), "C": waiting(2, 0)},
			want:    "B", reason: reasonSaturationPin, note: "saturation: no candidate has a fresh queue below 2; pinned B"},
		{name: "no pin while some candidate is provably below the floor", tune: func(p *plan.Policy) { p.WorkerQueueLimit, p.SaturationQueueFloor = 4, 2 },
			matched: map[string]int64{"A": 3072},
			loads:   map[string]load.Sample{"A": waiting(7, 0), "B": waiting(5, 0), "C": waiting(1, 0)},
			want:    "C", reason: reasonMissExact},
		{name: "unknown load does not prove a queue below the floor", tune: func(p *plan.Policy) { p.WorkerQueueLimit, p.SaturationQueueFloor = 4, 2 },
			matched: map[string]int64{"A": 3072}, loads: map[string]load.Sample{"A": waiting(7, 0), "B": waiting(5, 0)},
			want: "A", reason: reasonSaturationPin},
		{name: "the pinned holder still needs hard admission", tune: func(p *plan.Policy) { p.WorkerQueueLimit, p.SaturationQueueFloor = 4, 2 },
			matched: map[string]int64{"A": 3072},
			loads:   map[string]load.Sample{"A": waiting(7, 0), "B": waiting(5, 0), "C": waiting(2, 0)},
			limits:  Limits{MaxWaitingRequests: 7}, wantErr: "prefill engine A rejected by admission: reported waiting requests is 7, cap 7"},

		// 5: uncached work, switch margin and pressure guard.
		{name: "pressure guard moves to a less busy holder within the margin",
			matched: map[string]int64{"A": 3000, "B": 2500},
			loads:   map[string]load.Sample{"A": waiting(1, 10000), "B": waiting(1, 0)},
			want:    "B", reason: reasonPressureGuard, note: "pressure guard: A has 11096 tokens of work ahead, B has 1596 tokens"},
		{name: "guard needs the relative threshold too",
			matched: map[string]int64{"A": 3000, "B": 2500},
			loads:   map[string]load.Sample{"A": waiting(1, 5000), "B": waiting(1, 2500)},
			want:    "A", reason: reasonLongestPrefix},
		{name: "guard needs the absolute threshold too",
			matched: map[string]int64{"A": 3000, "B": 2500},
			loads:   map[string]load.Sample{"A": waiting(1, 1500), "B": waiting(1, 0)},
			want:    "A", reason: reasonLongestPrefix},
		{name: "holders beyond the switch margin cannot win on pressure",
			matched: map[string]int64{"A": 3000, "B": 1500},
			loads:   map[string]load.Sample{"A": waiting(1, 100000), "B": waiting(0, 0)},
			want:    "A", reason: reasonLongestPrefix},
		{name: "a wider margin lets them", tune: func(p *plan.Policy) { p.SwitchMarginTokens = new(int64(2000)) },
			matched: map[string]int64{"A": 3000, "B": 1500},
			loads:   map[string]load.Sample{"A": waiting(1, 100000), "B": waiting(0, 0)},
			want:    "B", reason: reasonPressureGuard},
		{name: "guard disabled", tune: func(p *plan.Policy) { p.PressureGuard.Enabled = false },
			matched: map[string]int64{"A": 3000, "B": 2500},
			loads:   map[string]load.Sample{"A": waiting(1, 10000), "B": waiting(1, 0)},
			want:    "A", reason: reasonLongestPrefix},
		{name: "guard needs every contender's report",
			matched: map[string]int64{"A": 3000, "B": 2500}, loads: map[string]load.Sample{"A": waiting(1, 10000)},
			want: "A", reason: reasonLongestPrefix},
		{name: "guard in queue time when both estimate it", tune: func(p *plan.Policy) { p.PressureGuard.AbsThresholdMS = ptr(100.0) },
			matched: map[string]int64{"A": 3000, "B": 2500},
			loads:   map[string]load.Sample{"A": withQueue(waiting(1, 0), 500), "B": withQueue(waiting(1, 900), 100)},
			want:    "B", reason: reasonPressureGuard, note: "A has 500 ms of work ahead, B has 100 ms"},
		{name: "equal uncached work: lower pressure, then id",
			matched: map[string]int64{"A": 3000, "B": 3000, "C": 3000},
			loads:   map[string]load.Sample{"A": waiting(2, 0), "B": waiting(1, 0), "C": waiting(1, 0)},
			want:    "B", reason: reasonLongestPrefix},
		{name: "rejected holders are skipped",
			matched: map[string]int64{"A": 3000, "B": 2000}, inflight: map[string]int64{"A": 1}, limits: Limits{MaxInflightRequests: 1},
			want: "B", reason: reasonLongestPrefix},

		// 6: miss and load fallback.
		{name: "miss: least pressure of two sampled", tune: func(p *plan.Policy) { p.MinLoadChoices = 2 },
			loads: map[string]load.Sample{"A": waiting(0, 0), "B": waiting(5, 0), "C": waiting(3, 0)},
			draws: []int{1, 2}, want: "C", reason: "no usable prefix holder; least pressure of 2 sampled candidates"},
		{name: "miss: k covering the group takes the exact minimum", tune: func(p *plan.Policy) { p.MinLoadChoices = 3 },
			loads: map[string]load.Sample{"A": waiting(2, 0), "B": waiting(5, 0), "C": waiting(3, 0)},
			want:  "A", reason: reasonMissExact},
		{name: "miss: ties are broken at random", tune: func(p *plan.Policy) { p.MinLoadChoices = 8 },
			draws: []int{2}, want: "C", reason: reasonMissExact},
		{name: "miss: one choice is uniform random", tune: func(p *plan.Policy) { p.MinLoadChoices = 1 },
			loads: map[string]load.Sample{"A": waiting(0, 0), "B": waiting(9, 0)},
			draws: []int{1}, want: "B", reason: reasonMissRandom},
		{name: "miss: the fallback's choice is checked", tune: func(p *plan.Policy) { p.MinLoadChoices = 3 },
			inflight: map[string]int64{"A": 1, "B": 1, "C": 1}, limits: Limits{MaxInflightRequests: 1}, draws: []int{0},
			wantErr: "prefill engine A rejected by admission: router in-flight requests is 1, cap 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, plan.RolePrefill, "A", "B", "C")
			for id, s := range tt.loads {
				f.report(id, s)
			}
			for id, n := range tt.inflight {
				f.inflight(id, n)
			}
			cfg := cacheDefaults()
			if tt.tune != nil {
				tt.tune(&cfg)
			}
			src := &fakeSource{res: PrefixResult{Matched: tt.matched}}
			p := NewCacheAware(src, f.table, script(t, tt.draws...), tt.limits, cfg)
			pass, group := traced()
			pick, err := p.Pick(context.Background(), f.workers, in(pass, cacheReq()))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
			} else if err != nil || pick.Engine.ID() != tt.want || pick.Reason != tt.reason {
				t.Fatalf("Pick = %v (%q), %v; want %s (%q)\nnotes %q", pick.Engine, pick.Reason, err, tt.want, tt.reason, group().Notes)
			}
			if tt.note != "" && !strings.Contains(strings.Join(group().Notes, "\n"), tt.note) {
				t.Fatalf("notes %q lack %q", group().Notes, tt.note)
			}
			// A pick made for a prefix reports its length (capped at the input); a
			// fallback pick reports none, whatever the engine holds below the gate.
			var prefix int64
			if tt.wantErr == "" && (tt.reason == reasonLongestPrefix || tt.reason == reasonPressureGuard || tt.reason == reasonSaturationPin) {
				prefix = min(tt.matched[tt.want], cacheReq().InputTokens)
			}
			if pick.PrefixTokens != prefix {
				t.Errorf("PrefixTokens = %d, want %d", pick.PrefixTokens, prefix)
			}
		})
	}
}

func TestCacheAwareLookupOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		src     *fakeSource
		noIDs   bool
		outcome string
		detail  string
		matches string
	}{
		{name: "hit, restricted to the candidates", src: &fakeSource{res: PrefixResult{Matched: map[string]int64{"B": 2048, "A": 16, "Z": 4096}}},
			outcome: decision.PrefixHit, matches: "A:16 B:2048"},
		{name: "hit elsewhere only", src: &fakeSource{res: PrefixResult{Matched: map[string]int64{"Z": 4096}}},
			outcome: decision.PrefixHit},
		{name: "confirmed miss", src: &fakeSource{}, outcome: decision.PrefixMiss},
		{name: "unavailable backend", src: &fakeSource{res: PrefixResult{Unavailable: true, Detail: "prefix indexer unavailable: timeout"}},
			outcome: decision.PrefixUnavailable, detail: "prefix indexer unavailable: timeout"},
		{name: "no token ids", src: &fakeSource{}, noIDs: true, outcome: decision.PrefixNoTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, plan.RolePrefill, "A", "B")
			p := NewCacheAware(tt.src, f.table, NewSeededRand(1), Limits{}, cacheDefaults())
			req := cacheReq()
			if tt.noIDs {
				req.TokenIDs = nil
			}
			pass, group := traced()
			pick, err := p.Pick(context.Background(), f.workers, in(pass, req))
			if err != nil {
				t.Fatal(err)
			}
			g := group()
			if g.Prefix == nil || g.Prefix.Source != "fake" || g.Prefix.Outcome != tt.outcome || g.Prefix.Detail != tt.detail {
				t.Fatalf("prefix record = %+v, want outcome %s", g.Prefix, tt.outcome)
			}
			var ms []string
			for _, m := range g.Prefix.Matches {
				ms = append(ms, m.Engine+":"+sprint(m.Tokens))
			}
			if strings.Join(ms, " ") != tt.matches {
				t.Fatalf("matches = %v, want %s", ms, tt.matches)
			}
			// Every outcome but a usable hit falls back to load.
			if tt.matches == "" && !strings.HasPrefix(pick.Reason, "no usable prefix holder") {
				t.Fatalf("reason = %q, want the load fallback", pick.Reason)
			}
			if tt.noIDs && tt.src.calls != 0 {
				t.Fatal("a request without token ids was looked up")
			}
		})
	}
}

func TestCacheAwareInvalidQueryStops(t *testing.T) {
	f := newFleet(t, plan.RolePrefill, "A")
	src := &fakeSource{err: errors.New("prefix indexer rejected the query: 400 Bad Request")}
	_, err := NewCacheAware(src, f.table, NewSeededRand(1), Limits{}, cacheDefaults()).Pick(context.Background(), f.workers, cacheReq())
	var ic *InvalidConfiguration
	if !errors.As(err, &ic) || !strings.Contains(err.Error(), "rejected the query") {
		t.Fatalf("err = %v, want InvalidConfiguration: an invalid query stops routing", err)
	}
}

func TestCacheAwareMemoizesLookups(t *testing.T) {
	f := newFleet(t, plan.RolePrefill, "A", "B")
	src := &fakeSource{res: PrefixResult{Matched: map[string]int64{"A": 2048}}}
	other := &fakeSource{}
	p := NewCacheAware(src, f.table, NewSeededRand(1), Limits{}, cacheDefaults())
	q := NewCacheAware(other, f.table, NewSeededRand(1), Limits{}, cacheDefaults())

	ctx := context.Background()
	pass := (*Pass)(nil).Start(true)
	for range 3 {
		if pick, err := p.Pick(ctx, f.workers, in(pass, cacheReq())); err != nil || pick.Engine.ID() != "A" {
			t.Fatalf("Pick = %v, %v", pick.Engine, err)
		}
		if _, err := q.Pick(ctx, f.workers, in(pass, cacheReq())); err != nil {
			t.Fatal(err)
		}
	}
	if src.calls != 1 || other.calls != 1 {
		t.Fatalf("lookups with a memo: %d and %d, want one per source", src.calls, other.calls)
	}
	// A new pass starts with a new memo: a later request looks up again.
	pass = pass.Start(true)
	if _, err := p.Pick(ctx, f.workers, in(pass, cacheReq())); err != nil || src.calls != 2 {
		t.Fatalf("lookups in a new pass: %d, want a fresh lookup", src.calls)
	}
	if _, err := p.Pick(ctx, f.workers, cacheReq()); err != nil || src.calls != 3 {
		t.Fatalf("lookups without a memo: %d, want every pick to look up", src.calls)
	}
	if pass.Start(false) != pass || (*Pass)(nil).Start(false) != nil {
		t.Fatal("Start without a memo replaced the pass or made one")
	}
}

func TestCacheAwareNoCandidates(t *testing.T) {
	src := &fakeSource{}
	_, err := NewCacheAware(src, nil, script(t), Limits{}, cacheDefaults()).Pick(context.Background(), nil, cacheReq())
	var nc *NoCandidates
	if !errors.As(err, &nc) || src.calls != 0 {
		t.Fatalf("err = %v after %d lookups, want NoCandidates before any lookup", err, src.calls)
	}
}

func TestCacheAwareRefusesDecode(t *testing.T) {
	f := newFleet(t, plan.RoleDecode, "D")
	src := &fakeSource{}
	_, err := NewCacheAware(src, f.table, script(t), Limits{}, cacheDefaults()).Pick(context.Background(), f.workers, request(plan.RoleDecode))
	var ic *InvalidConfiguration
	if !errors.As(err, &ic) || src.calls != 0 {
		t.Fatalf("err = %v, want InvalidConfiguration for a decode group", err)
	}
}
