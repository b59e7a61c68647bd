package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv"
	"github.com/routerkit/router/runtime/token"
)

// BenchmarkPrepareChat measures request preparation alone (body read, strict decoding,
// validation, chat rendering and tokenization, routing facts) for a short chat and for a
// conversation of about 128k tokens that resends its history, at bytes of body per
// second. The stand-in cases count with the stand-in vocabulary (longChat: 885 kB); the
// qwen3 cases render Qwen3's template and tokenize with its tokenizer, on English prose
// (proseChat: 133k Qwen tokens, 619 kB) and on longChat's body (749k Qwen tokens: its
// words are mostly digits, a token each). A cold case makes every turn new before each
// request. Run it with
//
//	go test ./runtime/server -run '^$' -bench PrepareChat -benchmem
func BenchmarkPrepareChat(b *testing.B) {
	p := testPlan([]plan.Engine{plainEngine("E1")}, plan.Model{Name: "m", Buckets: []plan.Bucket{
		{ID: "all", Groups: plan.Groups{Plain: ptr(group(plan.PowerOfTwo, plan.Admission{}))}},
	}})
	standin, err := New(p, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	qwen, err := New(qwenPlan(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		srv  *Server
		body []byte
		cold bool
	}{
		{"short", standin, []byte(chat("m", "Benchmark the router with a short prompt.", `, "max_tokens": 1`)), false},
		{"128k", standin, longChat(128 << 10), false},
		{"128k/cold", standin, longChat(128 << 10), true},
		{"qwen3/short", qwen, []byte(chat("m", "Benchmark the router with a short prompt.", `, "max_tokens": 1`)), false},
		{"qwen3/128k", qwen, proseChat(b, 128<<10), false},
		{"qwen3/128k/cold", qwen, proseChat(b, 128<<10), true},
		{"qwen3/749k", qwen, longChat(128 << 10), false},
	} {
		srv := tc.srv.current()
		b.Run(tc.name, func(b *testing.B) {
			for loop := loopCPU(b, len(tc.body)); loop(); {
				if tc.cold {
					unseen(tc.body)
				}
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(tc.body))
				w := httptest.NewRecorder()
				p, err := srv.prepare(w, r, srv.models.Chat)
				if err != nil {
					b.Fatal(err)
				}
				token.Recycle(p.Facts.TokenIDs) // as serveRouted does when the request is over
			}
		})
	}
}

// loopCPU is b.Loop for a benchmark of requests of size bytes that reports allocations
// and, when the loop ends, the process's CPU per operation (cpu-µs/op) since the call.
func loopCPU(b *testing.B, size int) func() bool {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0, n := processCPU(b), 0
	return func() bool {
		if b.Loop() {
			n++
			return true
		}
		b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(n), "cpu-µs/op")
		return false
	}
}

// processCPU is the process's user and system CPU time: on a machine shared with other
// jobs, CPU per operation is steadier than wall time (it includes the garbage collector's
// work on other threads).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// seenMark starts every turn of longChat; unseen overwrites it.
const seenMark = "turn00000000 "

// unseenCount numbers the bodies unseen makes, across runs of a benchmark (-count): a
// number that came back would find its turns in the cache.
var unseenCount atomic.Int64

// unseen makes every turn of a longChat or proseChat body new to the token cache by
// writing a number never written before into each turn's mark: the cold path. Only marks
// are overwritten, not other words that start with "turn".
func unseen(body []byte) {
	mark := fmt.Appendf(nil, "turn%08d ", unseenCount.Add(1)%100000000)
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte("turn"))
		if j < 0 {
			return
		}
		i += j
		if isMark(body[i:]) {
			copy(body[i:], mark)
		}
		i += len("turn")
	}
}

// isMark reports whether b starts with a turn mark: "turn", eight digits and a space.
func isMark(b []byte) bool {
	if len(b) < len(seenMark) || b[len(seenMark)-1] != ' ' {
		return false
	}
	for _, c := range b[len("turn") : len(seenMark)-1] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// proseChat is a conversation of about tokens Qwen3 tokens of English prose (the
// tokenizer's test document, about 4.6 bytes a token), in turns of that document, each
// starting with seenMark, ending with a user turn.
func proseChat(tb testing.TB, tokens int) []byte {
	prose, err := os.ReadFile("../token/hf/testdata/text/prose.txt")
	if err != nil {
		tb.Fatal(err)
	}
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var msgs []msg
	for i := 0; i*len(prose) < tokens*46/10; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, msg{role, seenMark + string(prose)})
	}
	if msgs[len(msgs)-1].Role != "user" {
		msgs = append(msgs, msg{"user", "and now?"})
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "max_tokens": 16})
	return body
}

// longChat is a conversation of about words words (the stand-in vocabulary makes one
// token of each) over turns of 500 words, ending with a user turn.
func longChat(words int) []byte {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var msgs []msg
	w := 0
	for i := 0; w < words; i++ {
		var s strings.Builder
		s.WriteString(seenMark)
		for j := range 500 {
			fmt.Fprintf(&s, "w%d%d ", i%97, j)
		}
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, msg{role, s.String()})
		w += 500
	}
	if msgs[len(msgs)-1].Role != "user" {
		msgs = append(msgs, msg{"user", "and now?"})
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "max_tokens": 16})
	return body
}

// BenchmarkGrowTurn measures what the router does for one request of a conversation of
// about 128k tokens whose history it has seen, grown by one user turn it has not: read the
// body, decode and validate it, render the chat template, tokenize (the history's
// messages from the token cache, the new turn anew), hash the prompt's blocks and look
// them up in cache_aware's prefix index, which holds the history on E1, up to the pick.
// Each op appends a new turn of about 200 words of English prose, numbered so that it was
// never seen, to the same history. `standin` counts with the stand-in vocabulary
// (longChat, 885 kB), `qwen3` renders Qwen3's template and tokenizes with its tokenizer
// (proseChat, 133k tokens, 619 kB). cpu-µs/op is the process's CPU per request, the
// garbage collector's included. Run it with
//
//	go test ./runtime/server -run '^$' -bench GrowTurn -benchmem -cpu 1
func BenchmarkGrowTurn(b *testing.B) {
	words := proseWords(b)
	for _, tc := range []struct {
		name string
		qwen bool
		body []byte
	}{
		{"standin", false, longChat(128 << 10)},
		{"qwen3", true, proseChat(b, 128<<10)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := qwenPlan()
			if !tc.qwen {
				p.Models[0].Tokenizer = nil
			}
			p.Models[0].Buckets[0].MaxContextTokens = nil
			srv, err := New(p, Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			g := srv.current()
			grow := newGrower(tc.body, words)
			seenHistory(b, g, tc.body)
			for loop := loopCPU(b, len(tc.body)); loop(); {
				body := grow.next()
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
				prepared, err := g.prepare(httptest.NewRecorder(), r, g.models.Chat)
				if err != nil {
					b.Fatal(err)
				}
				d := &record{}
				_, ticket, err := g.admit(r, prepared, d)
				leave(ticket)
				if err != nil {
					b.Fatal(err)
				}
				if d.picked[0].engine != "E1" || d.picked[0].prefixTokens == 0 {
					b.Fatalf("picked %+v, want E1 for its cached history", d.picked[0])
				}
				token.Recycle(prepared.Facts.TokenIDs)
			}
		})
	}
}

// seenHistory prepares body once, which fills the token cache with its messages, and
// stores its blocks in E1's entry of the generation's prefix index, as E1's KV events
// would after serving it.
func seenHistory(b *testing.B, g *generation, body []byte) {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	p, err := g.prepare(httptest.NewRecorder(), r, g.models.Chat)
	if err != nil {
		b.Fatal(err)
	}
	for _, bs := range g.deps.KV.BlockSizes("m") {
		ev := kv.Event{Kind: kv.BlockStored, Hashes: token.BlockHashes(p.Facts.TokenIDs, bs)}
		if !g.deps.KV.Apply("E1", 0, ev) {
			b.Fatal("the prefix index does not know E1")
		}
	}
}

// grower makes the bodies of BenchmarkGrowTurn: a conversation's messages, then one new
// user turn, then the rest of the body, in one reused buffer.
type grower struct {
	buf   []byte // the body up to its last message, then the current turn and tail
	head  int    // length of the body up to and with its last message
	tail  []byte // what follows the messages
	words []string
	turn  int
}

// newGrower returns the grower of body, a chat body whose messages array is followed by
// its "model" field (json.Marshal sorts the keys), taking its turns' words from words.
func newGrower(body []byte, words []string) *grower {
	end := bytes.LastIndex(body, []byte(`],"model"`))
	return &grower{buf: bytes.Clone(body[:end]), head: end, tail: bytes.Clone(body[end:]), words: words}
}

// next returns the body with a new turn of 200 words, numbered so that no earlier body
// (of any run in this process) had it. It is valid until the next call.
func (g *grower) next() []byte {
	g.turn++
	var s strings.Builder
	fmt.Fprintf(&s, "turn%08d ", unseenCount.Add(1)%100000000)
	for i := range 200 {
		s.WriteString(g.words[(g.turn*211+i)%len(g.words)])
		s.WriteByte(' ')
	}
	content, _ := json.Marshal(s.String())
	g.buf = append(g.buf[:g.head], `,{"role":"user","content":`...)
	g.buf = append(append(g.buf, content...), '}')
	return append(g.buf, g.tail...)
}

// proseWords returns the words of the tokenizer's English test document.
func proseWords(tb testing.TB) []string {
	prose, err := os.ReadFile("../token/hf/testdata/text/prose.txt")
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Fields(string(prose))
}
