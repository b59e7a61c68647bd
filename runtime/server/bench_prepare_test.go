package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// BenchmarkPrepareChat measures request preparation alone (body read, strict decoding,
// validation, chat rendering and tokenization with the stand-in vocabulary, routing
// facts) for a short chat and for a conversation of about 128k tokens that resends its
// history, at bytes of body per second. Run it with
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
		{"qwen3/128k", qwen, longChat(128 << 10), false},
		{"qwen3/128k/cold", qwen, longChat(128 << 10), true},
	} {
		srv := tc.srv
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			cpu0 := processCPU(b)
			n := 0
			defer func() { b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(n), "cpu-µs/op") }()
			for i := 0; b.Loop(); i++ {
				n++
				if tc.cold {
					unseen(tc.body, i)
				}
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(tc.body))
				w := httptest.NewRecorder()
				if _, herr := srv.prepareChat(w, r); herr != nil {
					b.Fatal(herr.msg)
				}
			}
		})
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

// unseen makes every turn of a longChat body new to the token cache by writing n into
// each turn's mark: the cold path.
func unseen(body []byte, n int) {
	mark := fmt.Appendf(nil, "turn%08d ", n%100000000)
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte("turn"))
		if j < 0 {
			return
		}
		i += j
		copy(body[i:], mark)
		i += len(mark)
	}
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
