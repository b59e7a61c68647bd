package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/routerkit/router/runtime/plan"
)

// approxGroup is a cache-aware group over an approximate prefix index that follows any
// holder of 64 tokens or more.
func approxGroup() plan.Group {
	g := group(plan.CacheAware, plan.Admission{})
	g.Policy.MinMatchedTokens, g.Policy.SwitchMarginTokens = i64(64), i64(0)
	g.Policy.CandidateMinWorkers, g.Policy.CandidateRatio, g.Policy.CandidateMaxWorkers, g.Policy.MinLoadChoices = 4, 1, 4, 2
	g.Policy.PrefixSource = &plan.PrefixSource{Type: "approximate", CapacityTokens: 500_000, TTLSecs: 120, BlockSize: 16}
	return g
}

// sharedPrefixChats are conversations with one long system prompt and different
// questions, as many clients of one application send.
func sharedPrefixChats(n int) []openai.ChatCompletionNewParams {
	system := strings.Repeat("You are a careful assistant for the routing team; answer briefly and cite the runbook. ", 12)
	out := make([]openai.ChatCompletionNewParams, n)
	for i := range out {
		out[i] = openai.ChatCompletionNewParams{Model: "m", MaxTokens: openai.Int(2), Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(system), openai.UserMessage(fmt.Sprintf("Question %d: which engine holds my prefix?", i))}}
	}
	return out
}

// TestApproximatePrefixFollowsTheFirstEngine: with no KV events configured, the router
// learns from its own dispatches where a system prompt was sent, sends the later
// conversations sharing it to that engine, and the engine reports them as cache hits.
func TestApproximatePrefixFollowsTheFirstEngine(t *testing.T) {
	g := approxGroup()
	p := testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2"), plainEngine("E3")},
		plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &g}}}})
	fc := startFleet(t, p)
	c := fc.client()
	chats := sharedPrefixChats(6)

	var first string
	for i, params := range chats {
		before := fc.sentCounts()
		got, err := c.Chat.Completions.New(testCtx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		engine := fc.sentTo(t, before)
		cached := got.Usage.PromptTokensDetails.CachedTokens
		if i == 0 {
			first = engine
			if cached != 0 {
				t.Fatalf("first conversation: %d cached tokens on a cold engine", cached)
			}
			continue
		}
		if engine != first {
			t.Fatalf("conversation %d went to %s, want %s which served the shared prompt first", i, engine, first)
		}
		if cached < 128 || cached%16 != 0 {
			t.Fatalf("conversation %d: %d cached tokens, want the shared prompt's pages (at least 128)", i, cached)
		}
	}
	// /admin/state reports each engine's size in the index: the shared prompt's pages and
	// the six questions' on the first engine, nothing elsewhere.
	for _, e := range fc.state(t).Engines {
		if len(e.PrefixIndex) != 1 || e.PrefixIndex[0].Source != "approximate" || e.PrefixIndex[0].CapacityTokens != 500_000 {
			t.Fatalf("%s: prefix_index %+v, want one approximate index of 500000 tokens", e.ID, e.PrefixIndex)
		}
		size := e.PrefixIndex[0]
		if (e.ID == first) != (size.Blocks > 0) || size.Tokens != int64(size.Blocks)*16 {
			t.Fatalf("%s: prefix_index %+v; the first engine was %s", e.ID, size, first)
		}
	}
}

// TestStateShowsLocalIndexSizes: an engine that publishes KV events shows the blocks its
// events stored in the local index.
func TestStateShowsLocalIndexSizes(t *testing.T) {
	fc := startFleet(t, qwenPlan())
	// Events published before the router's subscription connects are lost, so each try
	// sends a new prompt until one's blocks arrive.
	for try := range 100 {
		fc.engineOf(t, "/v1/chat/completions", chat("m", strings.Repeat(fmt.Sprintf("Tell me about prefix caches, take %d. ", try), 20), `, "max_tokens": 2`))
		time.Sleep(50 * time.Millisecond)
		for _, e := range fc.state(t).Engines {
			if len(e.PrefixIndex) != 1 || e.PrefixIndex[0].Source != "local_index" {
				t.Fatalf("%s: prefix_index %+v, want the local index only", e.ID, e.PrefixIndex)
			}
			if size := e.PrefixIndex[0]; size.Blocks > 0 && size.Tokens == int64(size.Blocks)*16 {
				return
			}
		}
	}
	t.Fatal("no engine's blocks reached the local index")
}

// TestApproximatePrefixPD: in a PD bucket the prefill engine that computed a prompt is the
// one the index learns, and later prompts sharing its prefix go to it.
func TestApproximatePrefixPD(t *testing.T) {
	g := approxGroup()
	p := testPlan([]plan.Engine{pdEngine("P1", plan.RolePrefill, 8998), pdEngine("P2", plan.RolePrefill, 8999),
		pdEngine("P3", plan.RolePrefill, 9000), pdEngine("D1", plan.RoleDecode, 0)},
		plan.Model{Name: "pd", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{PD: &plan.PDGroups{
			Prefill: g, Decode: group(plan.PowerOfTwo, plan.Admission{})}}}}})
	fc := startFleet(t, p)
	c := fc.client()
	chats := sharedPrefixChats(4)
	var first string
	for i, params := range chats {
		params.Model = "pd"
		before := fc.sentCounts()
		if _, err := c.Chat.Completions.New(testCtx(t), params); err != nil {
			t.Fatal(err)
		}
		engine := fc.sentTo(t, before, plan.RolePrefill)
		if i == 0 {
			first = engine
		} else if engine != first {
			t.Fatalf("conversation %d was prefilled on %s, want %s which prefilled the shared prompt first", i, engine, first)
		}
	}
	if n := fc.srv.current().deps.Approx[*g.Policy.PrefixSource].Blocks("D1"); n != 0 {
		t.Fatalf("the decode engine has %d blocks in the index, want none", n)
	}
}

// sentCounts is how many requests each engine has been sent so far.
func (fc *fleetCase) sentCounts() map[string]int {
	out := map[string]int{}
	for _, e := range fc.srv.current().plan.Engines {
		out[e.ID] = len(fc.sent.bodies(e.URL))
	}
	return out
}

// sentTo returns the engine, of one of roles if given, that was sent a request since
// before.
func (fc *fleetCase) sentTo(t *testing.T, before map[string]int, roles ...plan.Role) string {
	t.Helper()
	for _, e := range fc.srv.current().plan.Engines {
		if (len(roles) == 0 || slices.Contains(roles, e.Role)) && len(fc.sent.bodies(e.URL)) > before[e.ID] {
			return e.ID
		}
	}
	t.Fatal("the request reached no engine")
	return ""
}

// TestSpeculativeEntriesRecordedAtDispatch: with speculative_ttl_ms on the local index,
// the engine a request is dispatched to holds its prompt speculatively, whatever its KV
// events say, and /admin/state shows those entries beside the event-fed ones.
func TestSpeculativeEntriesRecordedAtDispatch(t *testing.T) {
	p := qwenPlan()
	p.Models[0].Buckets[0].Groups.Plain.Policy.PrefixSource = &plan.PrefixSource{Type: "local_index", SpeculativeTTLMS: 60_000}
	fc := startFleet(t, p)
	engine := fc.engineOf(t, "/v1/chat/completions", chat("m", strings.Repeat("Tell me about speculative entries. ", 20), `, "max_tokens": 2`))
	for _, e := range fc.state(t).Engines {
		if len(e.PrefixIndex) != 2 || e.PrefixIndex[0].Source != "local_index" || e.PrefixIndex[1].Source != "speculative" {
			t.Fatalf("%s: prefix_index %+v, want the local index and its speculative entries", e.ID, e.PrefixIndex)
		}
		if spec := e.PrefixIndex[1]; (e.ID == engine) != (spec.Blocks > 0) || spec.Tokens != int64(spec.Blocks)*16 {
			t.Fatalf("%s: speculative %+v; the request went to %s", e.ID, spec, engine)
		}
	}
}

// TestApproximatePrefixOnEveryEndpoint: the approximate index learns from every routed
// endpoint's dispatches, here /generate with input_ids and /v1/completions, not only chat.
func TestApproximatePrefixOnEveryEndpoint(t *testing.T) {
	g := approxGroup()
	p := testPlan([]plan.Engine{plainEngine("E1"), plainEngine("E2"), plainEngine("E3")},
		plan.Model{Name: "m", Buckets: []plan.Bucket{{ID: "all", Groups: plan.Groups{Plain: &g}}}})
	fc := startFleet(t, p)
	ids := make([]string, 160)
	for i := range ids {
		ids[i] = fmt.Sprint(2000 + i)
	}
	generate := `{"model": "m", "input_ids": [` + strings.Join(ids, ", ") + `], "sampling_params": {"max_new_tokens": 2}}`
	completion := `{"model": "m", "max_tokens": 2, "prompt": "` + strings.Repeat("The shared preamble of every completion prompt. ", 20) + `"}`
	for _, tt := range []struct{ path, body string }{{"/generate", generate}, {"/v1/completions", completion}} {
		first := fc.engineOf(t, tt.path, tt.body)
		for range 4 {
			if got := fc.engineOf(t, tt.path, tt.body); got != first {
				t.Fatalf("%s: repeated prompt went to %s, want %s which served it first", tt.path, got, first)
			}
		}
	}
}
