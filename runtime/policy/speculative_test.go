package policy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/state/load"
	"github.com/routerkit/router/runtime/token"
)

// burstCase is three engines publishing KV events under one cache-aware group reading the
// local or approximate index, optionally with speculative entries, on a settable clock.
// No event is applied and no dispatch ends unless a test says so: the burst arrives before
// anything confirms the first prompt.
type burstCase struct {
	now     time.Time
	deps    Deps
	pol     Policy
	workers []*engine.Worker
	prompt  []uint32
}

func newBurst(t *testing.T, source string, speculativeMS int) *burstCase {
	bc := &burstCase{now: t0, prompt: make([]uint32, 256)}
	for i := range bc.prompt {
		bc.prompt[i] = uint32(i*31 + 7)
	}
	clock := func() time.Time { return bc.now }
	src := plan.PrefixSource{Type: source, SpeculativeTTLMS: speculativeMS}
	if source == "approximate" {
		src.CapacityTokens, src.TTLSecs, src.BlockSize = 500_000, 120, 16
	}
	pol := plan.Policy{Type: plan.CacheAware, MinMatchedTokens: ptrTo(int64(64)), CandidateMinWorkers: 3, CandidateRatio: 1,
		CandidateMaxWorkers: 3, SwitchMarginTokens: ptrTo(int64(0)), MinLoadChoices: 2, PrefixSource: &src}
	p := &plan.Plan{Models: []plan.Model{{Name: "m", Buckets: []plan.Bucket{{ID: "b", Groups: plan.Groups{Plain: &plan.Group{Policy: pol}}}}}}}
	for i := range 3 {
		e := plan.Engine{ID: fmt.Sprintf("E%d", i+1), Model: "m", Role: plan.RolePlain, DPSize: 1,
			Load: plan.LoadSource{StaleAfterMS: 1000}, KVEvents: &plan.KVEvents{Endpoint: "tcp://127.0.0.1:1"}}
		p.Engines = append(p.Engines, e)
		bc.workers = append(bc.workers, engine.New(e))
	}
	var err error
	if bc.deps, err = NewDeps(p, load.NewTable(p.Engines, clock), NewSeededRand(1), clock); err != nil {
		t.Fatal(err)
	}
	if bc.pol, err = New("m", pol, bc.deps); err != nil {
		t.Fatal(err)
	}
	return bc
}

func ptrTo[T any](v T) *T { return &v }

// send picks an engine for the prompt and dispatches to it as the server does: the
// request stays in flight and the speculative entry is recorded as dispatch starts.
func (bc *burstCase) send(t *testing.T) string {
	t.Helper()
	req := &Request{Facts: Facts{Model: "m", InputTokens: int64(len(bc.prompt)), TokenIDs: bc.prompt}, Stage: plan.RolePlain, BucketID: "b"}
	pick, err := bc.pol.Pick(context.Background(), bc.workers, req)
	if err != nil {
		t.Fatal(err)
	}
	pick.Engine.AddInflight(1)
	bc.deps.RecordSpeculative(pick.Engine.ID(), NewBlockHashes(bc.prompt))
	return pick.Engine.ID()
}

// TestBurstDoesNotScatter measures a burst of twelve identical prompts sent before
// anything confirms the first one: the first engine's KV events (local index) or the
// first dispatch's success (approximate index). Without speculative entries every pick
// misses and the load fallback spreads them over all three engines, each computing the
// same prefix; with them, every prompt after the first finds it on the first engine.
func TestBurstDoesNotScatter(t *testing.T) {
	for _, source := range []string{"local_index", "approximate"} {
		for _, tt := range []struct {
			speculativeMS int
			engines       int
		}{{0, 3}, {2000, 1}} {
			bc := newBurst(t, source, tt.speculativeMS)
			seen := map[string]int{}
			for range 12 {
				seen[bc.send(t)]++
			}
			t.Logf("%s, speculative_ttl_ms %d: 12 identical prompts went to %d engines %v", source, tt.speculativeMS, len(seen), seen)
			if len(seen) != tt.engines {
				t.Errorf("%s, speculative_ttl_ms %d: the burst went to %d engines %v, want %d", source, tt.speculativeMS, len(seen), seen, tt.engines)
			}
		}
	}
}

// TestSpeculativeEntriesExpireUnlessConfirmed: a guess the engine's events never confirm
// stops counting after its TTL; a confirmed prefix stays, as the event-fed index holds it.
func TestSpeculativeEntriesExpireUnlessConfirmed(t *testing.T) {
	bc := newBurst(t, "local_index", 2000)
	first := bc.send(t)
	src := bc.pol.(*CacheAware).source
	held := func() map[string]int64 {
		res, err := src.Lookup(context.Background(), "m", bc.prompt)
		if err != nil {
			t.Fatal(err)
		}
		return res.Matched
	}
	if got := held(); got[first] != 256 || len(got) != 1 {
		t.Fatalf("right after dispatch: %v, want %s holding all 256 tokens", got, first)
	}
	if b, tok, ok := bc.deps.SpeculativeBlocks(first); !ok || b != 16 || tok != 256 {
		t.Fatalf("SpeculativeBlocks = %d, %d, %v", b, tok, ok)
	}
	bc.now = bc.now.Add(2001 * time.Millisecond)
	if got := held(); len(got) != 0 {
		t.Fatalf("unconfirmed after the TTL: %v, want nothing", got)
	}

	bc.send(t)
	bc.deps.KV.Apply(first, 0, kv.Event{Kind: kv.BlockStored, Hashes: token.BlockHashes(bc.prompt, 16), Medium: kv.MediumGPU})
	bc.now = bc.now.Add(time.Hour)
	if got := held(); got[first] != 256 {
		t.Fatalf("confirmed by BlockStored: %v, want %s still holding 256 tokens", got, first)
	}
}

func TestSpeculativeNeedsItsEntries(t *testing.T) {
	src := plan.PrefixSource{Type: "local_index", SpeculativeTTLMS: 500}
	_, err := New("m", plan.Policy{Type: plan.CacheAware, PrefixSource: &src}, Deps{})
	var ic *InvalidConfiguration
	if !errors.As(err, &ic) {
		t.Fatalf("New without the entries: %v, want InvalidConfiguration", err)
	}
}

// TestApproximateSpeculationConfirmedBySuccess: on the approximate index a guess lasts its
// TTL, and the dispatch's success makes it an entry of the index's own lifetime.
func TestApproximateSpeculationConfirmedBySuccess(t *testing.T) {
	bc := newBurst(t, "approximate", 2000)
	first := bc.send(t)
	src := bc.pol.(*CacheAware).source
	if src.Name() != "approximate" {
		t.Fatalf("source %q", src.Name())
	}
	held := func() map[string]int64 {
		res, _ := src.Lookup(context.Background(), "m", bc.prompt)
		return res.Matched
	}
	bc.now = bc.now.Add(2001 * time.Millisecond)
	if got := held(); len(got) != 0 {
		t.Fatalf("unconfirmed after the TTL: %v, want nothing", got)
	}
	bc.send(t)
	bc.deps.RecordDispatch(first, NewBlockHashes(bc.prompt))
	bc.now = bc.now.Add(time.Minute)
	if got := held(); got[first] != 256 {
		t.Fatalf("after the dispatch succeeded: %v, want %s holding 256 tokens until ttl_secs", got, first)
	}
}
