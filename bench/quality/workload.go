// Package quality measures routing quality: how each policy's choices change what clients
// see (time to first token, end-to-end latency, throughput) and how much of the prompt the
// engines find in their prefix caches, against a fleet of simulated engines under KV
// pressure. It is a benchmark, run by `make bench-quality`, not a test.
package quality

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Message is one chat message of a request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one request of a workload: when it is sent (from the start of the run), its
// chat, and for conversations the conversation and turn, so that a turn is never sent
// before the previous one has its answer.
type Request struct {
	At        time.Duration
	Messages  []Message
	MaxTokens int
	// Conv is the conversation id, sent as the session and routing-key headers; empty for
	// requests that belong to no conversation.
	Conv string
	// Turn is the index of the request in its conversation.
	Turn int
	// Class names the traffic the request belongs to, for the mix's per-class figures.
	Class string
	// TTFTSLOMS, when positive, is sent as the x-sgl-ttft-slo-ms target.
	TTFTSLOMS float64
	// PromptWords approximates the prompt's tokens (the simulator's stand-in vocabulary is
	// about one token per word); the arrival rate is derived from it.
	PromptWords int
}

// Shape sizes a workload. The defaults put the fleet under KV pressure: the shared
// documents together are larger than one engine's KV pool, so an engine keeps them cached
// only if the router sends it a subset.
type Shape struct {
	Requests     int
	OutputTokens int
	// Documents is how many shared documents there are, each DocumentWords long.
	Documents, DocumentWords int
	// QuestionWords is the length of a question or of a user turn.
	QuestionWords int
	// Conversations run Turns turns each over a private context of ContextWords.
	Conversations, Turns, ContextWords int
}

// DefaultShape is the benchmark's workload size.
func DefaultShape() Shape {
	return Shape{
		Requests: 240, OutputTokens: 16,
		Documents: 8, DocumentWords: 6000, QuestionWords: 40,
		Conversations: 40, Turns: 6, ContextWords: 1500,
	}
}

// Workloads are the benchmark's workload names, in report order.
var Workloads = []string{"shared_documents", "multi_turn", "no_reuse", "mix"}

// Generate returns the requests of the named workload, without arrival times, in sending
// order. The same seed gives the same requests.
func Generate(name string, s Shape, seed uint64) ([]Request, error) {
	g := newGen(s, seed)
	switch name {
	case "shared_documents":
		return g.documents(s.Requests), nil
	case "multi_turn":
		return g.conversations(s.Requests), nil
	case "no_reuse":
		return g.unique(s.Requests), nil
	case "mix":
		d, c, u := g.documents(s.Requests/3), g.conversations(s.Requests/3), g.unique(s.Requests-2*(s.Requests/3))
		return g.interleave(d, c, u), nil
	}
	return nil, fmt.Errorf("unknown workload %q (want one of %s)", name, strings.Join(Workloads, ", "))
}

type gen struct {
	rng  *rand.Rand
	s    Shape
	docs []string
}

// text returns n pseudo-words: lowercase letter strings the simulator's vocabulary maps to
// one token each, unique enough that unrelated texts share no prefix.
// newGen returns a generator of shape s; the same seed gives the same text.
func newGen(s Shape, seed uint64) *gen {
	return &gen{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), s: s}
}

func (g *gen) text(n int) string {
	var b strings.Builder
	b.Grow(n * 7)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		for range 3 + g.rng.IntN(5) {
			b.WriteByte(byte('a' + g.rng.IntN(26)))
		}
	}
	return b.String()
}

// documents returns n questions over the shared documents, the document chosen with a
// Zipf-like skew (some documents are asked about more often, as in real traffic).
func (g *gen) documents(n int) []Request {
	if g.docs == nil {
		for range g.s.Documents {
			g.docs = append(g.docs, g.text(g.s.DocumentWords))
		}
	}
	z := rand.NewZipf(g.rng, 1.1, 2, uint64(g.s.Documents-1))
	out := make([]Request, n)
	for i := range out {
		d := int(z.Uint64())
		out[i] = Request{
			Messages: []Message{
				{Role: "system", Content: "Answer from this document.\n\n" + g.docs[d]},
				{Role: "user", Content: g.text(g.s.QuestionWords)},
			},
			MaxTokens: g.s.OutputTokens, Class: "documents",
			PromptWords: g.s.DocumentWords + g.s.QuestionWords,
		}
	}
	return out
}

// Reply is the simulator's answer of n tokens, which the next turn of a conversation
// resends: generated token i is the i-th word of its fixed vocabulary.
func Reply(n int) string {
	words := strings.Fields(`lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod
	tempor incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud
	exercitation ullamco laboris nisi aliquip ex ea commodo consequat`)
	var b strings.Builder
	for i := range n {
		b.WriteString(words[i%len(words)])
		b.WriteByte(' ')
	}
	return b.String()
}

// conversations returns about n turns of conversations that resend their history; the
// conversations run concurrently, so their turns interleave.
func (g *gen) conversations(n int) []Request {
	convs := max(1, min(g.s.Conversations, n/max(1, g.s.Turns)))
	turns := make([][]Request, convs)
	for c := range turns {
		id := fmt.Sprintf("conv-%03d-%x", c, g.rng.Uint32())
		msgs := []Message{{Role: "system", Content: "Discuss this material.\n\n" + g.text(g.s.ContextWords)}}
		words := g.s.ContextWords
		for t := range g.s.Turns {
			msgs = append(msgs, Message{Role: "user", Content: g.text(g.s.QuestionWords)})
			words += g.s.QuestionWords
			turns[c] = append(turns[c], Request{
				Messages: append([]Message(nil), msgs...), MaxTokens: g.s.OutputTokens,
				Conv: id, Turn: t, Class: "conversations", PromptWords: words,
			})
			msgs = append(msgs, Message{Role: "assistant", Content: Reply(g.s.OutputTokens)})
			words += g.s.OutputTokens
		}
	}
	// Interleave: at each step pick a conversation with turns left at random.
	var out []Request
	for len(out) < convs*g.s.Turns {
		c := g.rng.IntN(convs)
		if len(turns[c]) == 0 {
			continue
		}
		out = append(out, turns[c][0])
		turns[c] = turns[c][1:]
	}
	return out
}

// unique returns n prompts that share nothing, as long as a document question.
func (g *gen) unique(n int) []Request {
	out := make([]Request, n)
	for i := range out {
		out[i] = Request{
			Messages:  []Message{{Role: "user", Content: g.text(g.s.DocumentWords/2 + g.s.QuestionWords)}},
			MaxTokens: g.s.OutputTokens, Class: "unique",
			PromptWords: g.s.DocumentWords/2 + g.s.QuestionWords,
		}
	}
	return out
}

// interleave merges the streams at random, keeping each stream's order.
func (g *gen) interleave(streams ...[]Request) []Request {
	var out []Request
	for {
		var left []int
		for i, s := range streams {
			if len(s) > 0 {
				left = append(left, i)
			}
		}
		if len(left) == 0 {
			return out
		}
		i := left[g.rng.IntN(len(left))]
		out = append(out, streams[i][0])
		streams[i] = streams[i][1:]
	}
}

// Schedule sets Poisson arrival times at rate per second.
func Schedule(reqs []Request, rate float64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var t float64
	for i := range reqs {
		t += rng.ExpFloat64() / rate
		reqs[i].At = time.Duration(t * float64(time.Second))
	}
}
