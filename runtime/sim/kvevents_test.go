package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/openai/openai-go/v3"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/token"
)

func TestEncodeBatchGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/kv_batch.golden.hex")
	if err != nil {
		t.Fatal(err)
	}
	const h1, h2 = -3488128144981237669, 5674439469042975057
	got, err := encodeBatch(time.Unix(1700000000, 250000000), []kvEvent{
		{kind: blockStored, hash: h1, tokens: []uint32{1, 2, 3, 4}},
		{kind: blockStored, hash: h2, parent: h1, hasParent: true, tokens: []uint32{5, 6, 7, 8}},
		{kind: blockRemoved, hash: h2},
		{kind: allBlocksCleared},
	}, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(got) != strings.TrimSpace(string(want)) {
		t.Fatalf("encoded batch\n%x\ndiffers from testdata/kv_batch.golden.hex\n%s", got, want)
	}
}

// wireEvent is a KV event decoded by the test subscriber, independently of the encoder.
type wireEvent struct {
	seq       uint64
	dpRank    int64
	tag       string
	hashes    []int64
	parent    *int64
	tokens    []uint32
	blockSize int64
}

// subscriber is a ZMQ SUB socket on one engine's KV events, decoding what it receives.
type subscriber struct {
	t      *testing.T
	sock   zmq4.Socket
	topic  string
	events chan wireEvent
}

func subscribe(t *testing.T, endpoint, topic string) *subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscriber{t: t, sock: zmq4.NewSub(ctx), topic: topic, events: make(chan wireEvent, 1024)}
	t.Cleanup(func() { cancel(); s.sock.Close() })
	if err := s.sock.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	if err := s.sock.SetOption(zmq4.OptionSubscribe, topic); err != nil {
		t.Fatal(err)
	}
	go s.read()
	return s
}

// read decodes messages until the socket closes. Decoding errors are test failures.
func (s *subscriber) read() {
	defer close(s.events)
	for {
		msg, err := s.sock.Recv()
		if err != nil {
			return
		}
		evs, err := decodeMessage(msg.Frames, s.topic)
		if err != nil {
			s.t.Errorf("bad kv event message: %v", err)
			return
		}
		for _, e := range evs {
			s.events <- e
		}
	}
}

func decodeMessage(frames [][]byte, topic string) ([]wireEvent, error) {
	if len(frames) != 3 || string(frames[0]) != topic || len(frames[1]) != 8 {
		return nil, fmt.Errorf("want frames (topic %q, 8-byte seq, payload), got %q", topic, frames)
	}
	seq := binary.BigEndian.Uint64(frames[1])
	var batch []any
	if err := msgpack.Unmarshal(frames[2], &batch); err != nil {
		return nil, err
	}
	if len(batch) != 3 {
		return nil, fmt.Errorf("batch has %d fields, want [ts, events, dp_rank]", len(batch))
	}
	if _, ok := batch[0].(float64); !ok {
		return nil, fmt.Errorf("ts is %T, want float64", batch[0])
	}
	raw, ok := batch[1].([]any)
	if !ok {
		return nil, fmt.Errorf("events are %T", batch[1])
	}
	var out []wireEvent
	for _, r := range raw {
		f, ok := r.([]any)
		if !ok || len(f) == 0 {
			return nil, fmt.Errorf("event %v is not a tagged array", r)
		}
		e := wireEvent{seq: seq, dpRank: toInt(batch[2])}
		e.tag, _ = f[0].(string)
		switch {
		case e.tag == "BlockStored" && len(f) == 7:
			e.hashes = toInts(f[1])
			if f[2] != nil {
				p := toInt(f[2])
				e.parent = &p
			}
			for _, id := range f[3].([]any) {
				e.tokens = append(e.tokens, uint32(toInt(id)))
			}
			e.blockSize = toInt(f[4])
			if f[5] != nil || f[6] != "GPU" {
				return nil, fmt.Errorf("BlockStored lora_id/medium = %v/%v", f[5], f[6])
			}
		case e.tag == "BlockRemoved" && len(f) == 3:
			e.hashes = toInts(f[1])
		case e.tag == "AllBlocksCleared" && len(f) == 1:
		default:
			return nil, fmt.Errorf("unexpected event %v", f)
		}
		out = append(out, e)
	}
	return out, nil
}

// toInt reads a msgpack integer, which decodes as int64 or, when positive, as uint64.
func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case uint64:
		return int64(n)
	case int8:
		return int64(n)
	case int16:
		return int64(n)
	case int32:
		return int64(n)
	case uint8:
		return int64(n)
	case uint16:
		return int64(n)
	case uint32:
		return int64(n)
	}
	panic(fmt.Sprintf("not an integer: %T", v))
}

func toInts(v any) []int64 {
	var out []int64
	for _, x := range v.([]any) {
		out = append(out, toInt(x))
	}
	return out
}

// next returns the next event, failing the test after a bounded wait.
func (s *subscriber) next() wireEvent {
	s.t.Helper()
	select {
	case e, ok := <-s.events:
		if !ok {
			s.t.Fatal("subscriber closed")
		}
		return e
	case <-time.After(wait.Timeout):
		s.t.Fatalf("no kv event within %v", wait.Timeout)
	}
	return wireEvent{}
}

// nextOf returns the next event with this tag, skipping others.
func (s *subscriber) nextOf(tag string) wireEvent {
	s.t.Helper()
	for {
		if e := s.next(); e.tag == tag {
			return e
		}
	}
}

// sync beats ZMQ's slow-joiner problem: a PUB socket drops messages until the
// subscription has reached it, so flush the idle engine until an AllBlocksCleared
// arrives, then drain the extra ones. It returns the sequence number of the last.
func (s *subscriber) sync(e *Engine) uint64 {
	s.t.Helper()
	deadline := time.Now().Add(wait.Timeout)
	for time.Now().Before(deadline) {
		do(s.t, http.MethodPost, e.URL()+"/flush_cache", "")
		select {
		case ev := <-s.events:
			last := ev.seq
			for {
				select {
				case ev := <-s.events:
					last = ev.seq
				case <-time.After(50 * time.Millisecond):
					return last
				}
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.t.Fatal("subscriber never received an event")
	return 0
}

// referenceHashes computes SGLang block hashes with the Python reference script, so the
// check does not rely on the Go implementation. Without python3 it falls back to
// token.BlockHashes, which runtime/token checks against a golden file the same script
// wrote, so the wire test still runs.
func referenceHashes(t *testing.T, ids []uint32, blockSize int) []int64 {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 not installed: comparing with the golden-checked token.BlockHashes")
		return token.BlockHashes(ids, blockSize)
	}
	in, _ := json.Marshal([]map[string]any{{"block_size": blockSize, "token_ids": ids}})
	cmd := exec.Command(python, "../token/testdata/sglang_block_hash.py")
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference script: %v", err)
	}
	var res []struct{ Hashes []int64 }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res[0].Hashes
}

func kvEngine(t *testing.T, mutate ...func(*EngineSpec)) (*Engine, *subscriber) {
	t.Helper()
	e := startEngine(t, append([]func(*EngineSpec){func(s *EngineSpec) {
		s.KVEvents = &KVEventsSpec{Endpoint: "tcp://127.0.0.1:0"}
	}}, mutate...)...)
	s := subscribe(t, e.KVEndpoints()[0], e.KVTopic())
	return e, s
}

func TestKVEventsOverZMQ(t *testing.T) {
	e, sub := kvEngine(t)
	if e.KVTopic() != "kv@E1@m" {
		t.Fatalf("topic = %q", e.KVTopic())
	}
	seq := sub.sync(e)

	user := strings.Repeat("Explain the theory of relativity in simple words. ", 4)
	c := client(e)
	if _, err := c.Chat.Completions.New(testCtx(t), params(user)); err != nil {
		t.Fatal(err)
	}
	ids := token.EncodeChat([]token.Message{{Role: "system", Content: longSystem}, {Role: "user", Content: user}})
	bs := DefaultConfig().BlockSize
	want := referenceHashes(t, ids, bs)

	var got []int64
	var stored []uint32
	for len(got) < len(want) {
		ev := sub.next()
		if ev.tag == "AllBlocksCleared" && len(got) == 0 { // a late answer to sync's flushes
			seq = ev.seq
			continue
		}
		if ev.seq != seq && ev.seq != seq+1 { // events of one batch share its number
			t.Fatalf("sequence went from %d to %d", seq, ev.seq)
		}
		seq = ev.seq
		if ev.tag != "BlockStored" || len(ev.hashes) != 1 || ev.blockSize != int64(bs) || ev.dpRank != 0 {
			t.Fatalf("want one BlockStored per page, got %+v", ev)
		}
		if len(got) == 0 && ev.parent != nil || len(got) > 0 && (ev.parent == nil || *ev.parent != got[len(got)-1]) {
			t.Fatalf("block %d parent = %v, want the previous block's hash", len(got), ev.parent)
		}
		got = append(got, ev.hashes[0])
		stored = append(stored, ev.tokens...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("block hashes %v differ from the reference %v", got, want)
	}
	if !slices.Equal(stored, ids[:len(want)*bs]) {
		t.Fatal("BlockStored token ids are not the prompt's")
	}

	do(t, http.MethodPost, e.URL()+"/flush_cache", "")
	if ev := sub.next(); ev.tag != "AllBlocksCleared" || ev.seq != seq+1 {
		t.Fatalf("after flush got %+v, want AllBlocksCleared with seq %d", ev, seq+1)
	}
}

func TestKVEventsReportEviction(t *testing.T) {
	e, sub := kvEngine(t, func(s *EngineSpec) {
		s.Config.KVCapacityTokens, s.Config.ContextLength, s.Config.OutputTokens = 256, 256, 8
	})
	sub.sync(e)
	c := client(e)
	ctx := testCtx(t)
	prompt := func(word string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat(word+" ", 150))}}
	}
	if _, err := c.Chat.Completions.New(ctx, prompt("alpha")); err != nil {
		t.Fatal(err)
	}
	var first []int64
	for len(first) < 150/16 {
		first = append(first, sub.nextOf("BlockStored").hashes...)
	}
	// 150 more tokens do not fit next to the 144 cached ones in 256: the first prompt's
	// blocks are evicted, leaf first.
	if _, err := c.Chat.Completions.New(ctx, prompt("beta")); err != nil {
		t.Fatal(err)
	}
	removed := sub.nextOf("BlockRemoved").hashes
	if removed[0] != first[len(first)-1] {
		t.Fatalf("first eviction removed %d, want the deepest block %d", removed[0], first[len(first)-1])
	}
}

func TestKVEventsPerDPRank(t *testing.T) {
	e := startEngine(t, func(s *EngineSpec) {
		s.DPSize = 2
		s.KVEvents = &KVEventsSpec{Endpoint: "tcp://127.0.0.1:0", Topic: "kv"}
	})
	eps := e.KVEndpoints()
	if len(eps) != 2 || portOf(t, eps[1]) != portOf(t, eps[0])+1 {
		t.Fatalf("rank endpoints %v are not on consecutive ports", eps)
	}
	var info struct {
		KVEvents kvEventsInfo `json:"kv_events"`
	}
	getJSON(t, e.URL()+"/server_info", &info)
	if info.KVEvents.Endpoint != eps[0] || info.KVEvents.EndpointPortBase != portOf(t, eps[0]) || info.KVEvents.DPSize != 2 || info.KVEvents.Topic != "kv" {
		t.Fatalf("server_info kv_events = %+v", info.KVEvents)
	}
	sub := subscribe(t, eps[1], "kv")
	sub.sync(e)
	body := chatBody(`,"data_parallel_rank":1`)
	if status, resp := do(t, http.MethodPost, e.URL()+"/v1/chat/completions", body); status != http.StatusOK {
		t.Fatalf("%d %s", status, resp)
	}
	// "hello there" is 9 tokens with the template: no full block, so nothing is stored.
	// A longer prompt on rank 1 must show up with dp_rank 1.
	long := `{"model":"m","data_parallel_rank":1,"messages":[{"role":"user","content":"` + strings.Repeat("x ", 40) + `"}]}`
	if status, resp := do(t, http.MethodPost, e.URL()+"/v1/chat/completions", long); status != http.StatusOK {
		t.Fatalf("%d %s", status, resp)
	}
	if ev := sub.nextOf("BlockStored"); ev.dpRank != 1 {
		t.Fatalf("rank 1 published %+v", ev)
	}
}

func portOf(t *testing.T, endpoint string) int {
	t.Helper()
	var port int
	if _, err := fmt.Sscanf(endpoint[strings.LastIndex(endpoint, ":")+1:], "%d", &port); err != nil {
		t.Fatal(err)
	}
	return port
}

// TestKVSocketsSurviveHostilePeers sends issue 25's 73 bytes, a ZMTP greeting and a
// command frame header declaring 1 TiB, to a simulated engine's PUB and replay sockets,
// which run inside `router serve --demo` and `router sim`: each connection is dropped
// before zmq4 allocates the body, and the engine goes on publishing.
func TestKVSocketsSurviveHostilePeers(t *testing.T) {
	e, sub := kvEngine(t, func(s *EngineSpec) { s.KVEvents.ReplayEndpoint = "tcp://127.0.0.1:0" })
	hostile := make([]byte, 64)
	hostile[0], hostile[9], hostile[10] = 0xff, 0x7f, 3
	copy(hostile[12:], "NULL")
	hostile = binary.BigEndian.AppendUint64(append(hostile, 0x06), 1<<40)
	for _, ep := range []string{e.KVEndpoints()[0], e.KVReplayEndpoints()[0]} {
		c, err := net.Dial("tcp", strings.TrimPrefix(ep, "tcp://"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(hostile); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(wait.Timeout))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("%s kept the hostile connection open: %v", ep, err)
		}
		c.Close()
	}
	sub.sync(e) // the publisher still reaches its subscriber
}
