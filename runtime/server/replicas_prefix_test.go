package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/affinity/redistest"
)

// sharedApproxPlan is four plain engines of model "m" under cache_aware with an
// approximate prefix source and no KV events, shared between replicas when share is
// plan.ShareStore.
func sharedApproxPlan(share string) *plan.Plan {
	g := approxGroup()
	g.Policy.PrefixSource.Share = share
	return testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2"), plainEngine("E3"), plainEngine("E4")},
		plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &g}}}})
}

// conversation is one multi-turn chat: a short system prompt every conversation shares,
// then its own turns, each with the answer the engine gave to the previous one.
type conversation struct {
	marker   string
	messages []openai.ChatCompletionMessageParamUnion
	engines  []string // the engine of each turn sent so far
}

func newConversation(i int) *conversation {
	marker := fmt.Sprintf("<conv-%d>", i)
	first := marker + " " + strings.Repeat(fmt.Sprintf("Here is part %d of my design document, please keep it in mind. ", i), 16)
	return &conversation{marker: marker, messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are a helpful assistant."), openai.UserMessage(first)}}
}

// send sends the conversation's next turn to fc and records which engine served it.
func (c *conversation) send(t *testing.T, rs *replicaSet, p *plan.Plan, fc *fleetCase) error {
	client := fc.client()
	got, err := client.Chat.Completions.New(testCtx(t), openai.ChatCompletionNewParams{Model: "m", MaxTokens: openai.Int(8), Messages: c.messages})
	if err != nil {
		return err
	}
	counts := rs.enginesOf(p, c.marker)
	for id, n := range counts {
		if n > countOf(c.engines, id) {
			c.engines = append(c.engines, id)
			break
		}
	}
	c.messages = append(c.messages, openai.AssistantMessage(got.Choices[0].Message.Content),
		openai.UserMessage(fmt.Sprintf("Turn %d: what changes in section %d?", len(c.engines), len(c.engines))))
	return nil
}

func countOf(ids []string, id string) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// multiTurn runs convs conversations of turns turns, eight at a time, turn k of
// conversation c on replica (c+k) mod the replicas, as a round-robin load balancer
// spreads them. It returns the share of follow-up turns that reached the engine of the
// conversation's previous turn, and each engine's share of all turns.
func multiTurn(t *testing.T, rs *replicaSet, p *plan.Plan, convs, turns int) (followed float64, shares map[string]float64) {
	t.Helper()
	all := make([]*conversation, convs)
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, convs)
	for range 8 {
		wg.Go(func() {
			for c := range next {
				all[c] = newConversation(c)
				for k := range turns {
					if err := all[c].send(t, rs, p, rs.routers[(c+k)%len(rs.routers)]); err != nil {
						errs <- fmt.Errorf("conversation %d turn %d: %w", c, k, err)
						break
					}
				}
			}
		})
	}
	for c := range convs {
		next <- c
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	hits, follow, picks := 0, 0, map[string]int{}
	for _, c := range all {
		if len(c.engines) != turns {
			t.Fatalf("%s: engines %v for %d turns", c.marker, c.engines, turns)
		}
		for k, id := range c.engines {
			picks[id]++
			if k > 0 {
				follow++
				if id == c.engines[k-1] {
					hits++
				}
			}
		}
	}
	shares = map[string]float64{}
	for id, n := range picks {
		shares[id] = float64(n) / float64(convs*turns)
	}
	return float64(hits) / float64(follow), shares
}

// TestReplicasSharePrefixesWithoutEvents: three routers behind round-robin, no KV events,
// an approximate prefix source shared through a real redis-server. Each follow-up turn of
// a conversation reaches the engine that served the previous one whichever replica gets
// it, and new conversations still spread over the engines.
func TestReplicasSharePrefixesWithoutEvents(t *testing.T) {
	redis := redistest.Start(t)
	p := sharedApproxPlan(plan.ShareStore)
	rs := startReplicas(t, p, 3, redis.Addr())
	followed, shares := multiTurn(t, rs, p, 40, 5)
	t.Logf("follow-up turns on their conversation's engine: %.3f; engine shares %v", followed, shares)
	if followed < 0.95 {
		t.Errorf("%.3f of follow-up turns reached their conversation's engine, want at least 0.95", followed)
	}
	for id, s := range shares {
		if s >= 0.45 {
			t.Errorf("engine %s took %.3f of the turns, want under 0.45 of 4 engines' picks", id, s)
		}
	}
	if len(shares) != 4 {
		t.Errorf("turns reached engines %v, want all four", shares)
	}
}

// TestRestartedReplicaFindsPrefixesFromItsFirstRequest: a replica that starts while the
// others run, with nothing learned, routes the next turn of conversations it never saw to
// the engines holding them, from its first request: its lookups read the claims the other
// replicas left in the store.
func TestRestartedReplicaFindsPrefixesFromItsFirstRequest(t *testing.T) {
	redis := redistest.Start(t)
	p := sharedApproxPlan(plan.ShareStore)
	rs := startReplicas(t, p, 2, redis.Addr())
	convs := make([]*conversation, 8)
	for i := range convs {
		convs[i] = newConversation(i)
		if err := convs[i].send(t, rs, p, rs.routers[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	restarted := serveReplica(t, clonePlan(t, p))
	rs.routers = append(rs.routers, restarted)
	for _, c := range convs {
		if err := c.send(t, rs, p, restarted); err != nil {
			t.Fatal(err)
		}
		if c.engines[1] != c.engines[0] {
			t.Errorf("%s: first turn on %s, its next turn on the restarted replica went to %s", c.marker, c.engines[0], c.engines[1])
		}
	}
}

// TestSharedPrefixesWithoutTheStore: with the store gone, a replica routes with its own
// index, as a single router does: the conversations it serves keep their engines, and no
// request fails.
func TestSharedPrefixesWithoutTheStore(t *testing.T) {
	redis := redistest.Start(t)
	p := sharedApproxPlan(plan.ShareStore)
	rs := startReplicas(t, p, 3, redis.Addr())
	redis.Stop()
	one := &replicaSet{routers: rs.routers[:1]}
	followed, shares := multiTurn(t, one, p, 16, 4)
	t.Logf("store down, one replica: follow-ups on their engine %.3f, shares %v", followed, shares)
	if followed < 0.95 {
		t.Errorf("with the store down, %.3f of one replica's follow-ups reached their conversation's engine, want at least 0.95", followed)
	}
	if st := bindingsStatus(t, rs.routers[0]); st.Up {
		t.Errorf("the replica reports the stopped store up: %+v", st)
	}
}
