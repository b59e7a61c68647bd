package kv

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/runtime/plan"
)

// freePort returns a TCP port that was free a moment ago on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// dialingPublisher is a PUB socket that dials the router, as llm-d's simulator and
// vLLM with a non-wildcard endpoint do.
type dialingPublisher struct {
	t     *testing.T
	sock  zmq4.Socket
	topic string
}

func dialPub(t *testing.T, endpoint, topic string) *dialingPublisher {
	t.Helper()
	sock := zmq4.NewPub(context.Background(), zmq4.WithDialerRetry(20*time.Millisecond), zmq4.WithDialerMaxRetries(500))
	if err := sock.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	return &dialingPublisher{t: t, sock: sock, topic: topic}
}

func (p *dialingPublisher) store(seq uint64, h int64) {
	p.t.Helper()
	payload := encode(p.t, []any{1.0, []any{[]any{"BlockStored", []any{h}, nil, []any{}, 16}}, 0})
	if err := p.sock.Send(zmq4.NewMsgFrom([]byte(p.topic), binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
		p.t.Fatal(err)
	}
}

// joinBind is join for a dialing publisher: it stores a marker with increasing sequence
// numbers until the index shows it, and returns the next sequence number.
func joinBind(t *testing.T, pub *dialingPublisher, ix *Index, seq uint64, marker int64) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !holds(ix, marker) {
		if time.Now().After(deadline) {
			t.Fatal("the router never received a message")
		}
		pub.store(seq, marker)
		seq++
		time.Sleep(20 * time.Millisecond)
	}
	return seq
}

func TestBindModeRoutesByTopic(t *testing.T) {
	port := strconv.Itoa(freePort(t))
	kv := func(topic string) *plan.KVEvents {
		return &plan.KVEvents{Mode: plan.KVBind, Endpoint: "tcp://127.0.0.1:" + port, Topic: topic, BlockSize: 16}
	}
	p := &plan.Plan{Engines: []plan.Engine{
		{ID: "A", Model: "m", KVEvents: kv("kv@A@m")},
		{ID: "B", Model: "m", KVEvents: kv("kv@B@m")},
	}}
	ix := NewIndex(p)
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := Subscribe(ctx, p, ix, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); sub.Wait() }()

	// Both publishers dial the one endpoint; each message lands on its topic's engine.
	a := dialPub(t, "tcp://127.0.0.1:"+port, "kv@A@m")
	b := dialPub(t, "tcp://127.0.0.1:"+port, "kv@B@m")
	seqA := joinBind(t, a, ix, 1, 100) // llm-d's simulator counts from 1
	joinBind(t, b, ix, 0, 200)
	if ix.Blocks("A") != 1 || ix.Blocks("B") != 1 {
		t.Fatalf("blocks A=%d B=%d, want one each", ix.Blocks("A"), ix.Blocks("B"))
	}

	// A stranger's topic is counted, never indexed.
	stranger := dialPub(t, "tcp://127.0.0.1:"+port, "kv@Z@m")
	deadline := time.Now().Add(10 * time.Second)
	for ix.UnknownTopics() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the unknown topic was never counted")
		}
		stranger.store(0, 300)
		time.Sleep(20 * time.Millisecond)
	}
	if holds(ix, 300) {
		t.Fatal("a message of an unknown topic was indexed")
	}

	// A gap without a replay endpoint drops A's blocks (and only A's) and is counted.
	a.store(seqA+5, 101)
	eventually(t, "the block after the gap", func() bool { return holds(ix, 101) })
	if holds(ix, 100) || !holds(ix, 200) {
		t.Fatal("a gap kept A's stale blocks, or dropped B's")
	}
	if s := ix.Stats("A"); s.Gaps != 1 {
		t.Fatalf("A's gaps = %d, want 1", s.Gaps)
	}
}

// replayingEngine is an engine rank's publisher with vLLM's replay socket: a PUB for live
// batches and a ROUTER that resends buffered ones from a requested sequence number.
type replayingEngine struct {
	t      *testing.T
	pub    *publisher
	router zmq4.Socket
	buffer map[uint64][]byte
	served chan uint64 // the start of each replay request served
}

func newReplayingEngine(t *testing.T) *replayingEngine {
	t.Helper()
	e := &replayingEngine{t: t, pub: listen(t, "127.0.0.1:0"), buffer: map[uint64][]byte{}, served: make(chan uint64, 4)}
	e.router = zmq4.NewRouter(context.Background())
	if err := e.router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.router.Close() })
	return e
}

func (e *replayingEngine) replayEndpoint() string { return "tcp://" + e.router.Addr().String() }

// batch records a store of h under seq and returns its payload.
func (e *replayingEngine) batch(seq uint64, h int64) []byte {
	payload := encode(e.t, []any{1.0, []any{[]any{"BlockStored", []any{h}, nil, []any{}, 16}}, 0})
	e.buffer[seq] = payload
	return payload
}

// serve answers one replay request as vllm/distributed/kv_events.py's _service_replay.
func (e *replayingEngine) serve(last uint64) {
	msg, err := e.router.Recv()
	if err != nil {
		return
	}
	id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[len(msg.Frames)-1])
	for seq := start; seq <= last; seq++ {
		if p, ok := e.buffer[seq]; ok {
			_ = e.router.Send(zmq4.NewMsgFrom(id, []byte{}, binary.BigEndian.AppendUint64(nil, seq), p))
		}
	}
	_ = e.router.Send(zmq4.NewMsgFrom(id, []byte{}, binary.BigEndian.AppendUint64(nil, endOfReplay), []byte{}))
	e.served <- start
}

func TestGapRefilledFromTheReplayEndpoint(t *testing.T) {
	eng := newReplayingEngine(t)
	p := &plan.Plan{Engines: []plan.Engine{{ID: "E", Model: "m", KVEvents: &plan.KVEvents{
		Endpoint: "tcp://" + eng.pub.addr, Topic: "kv@E", BlockSize: 16, ReplayEndpoint: eng.replayEndpoint()}}}}
	ix := NewIndex(p)
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := Subscribe(ctx, p, ix, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); sub.Wait() }()
	seq := join(t, eng.pub, ix, 0, 100)

	// Batches seq and seq+1 are lost on the live socket; seq+2 arrives and the subscriber
	// asks the replay endpoint for the missing two.
	eng.batch(seq, 1)
	eng.batch(seq+1, 2)
	go eng.serve(seq + 2)
	eng.pub.send(seq+2, eng.batch(seq+2, 3))
	eventually(t, "the block after the gap", func() bool { return holds(ix, 3) })
	if got := <-eng.served; got != seq {
		t.Fatalf("replay asked from %d, want %d", got, seq)
	}
	if !holds(ix, 1) || !holds(ix, 2) || !holds(ix, 100) {
		t.Fatal("the refill lost blocks: the missed batches or the earlier ones")
	}
	if s := ix.Stats("E"); s.Gaps != 1 || s.Replays != 1 || s.ReplayFailures != 0 {
		t.Fatalf("stats %+v, want one gap refilled", s)
	}

	// The publisher's buffer no longer has the missed batch: the refill fails and the
	// rank's blocks are dropped, as without a replay endpoint.
	go eng.serve(seq + 5)
	eng.pub.send(seq+5, eng.batch(seq+5, 5))
	eventually(t, "the block after the second gap", func() bool { return holds(ix, 5) })
	<-eng.served
	if holds(ix, 1) || holds(ix, 100) {
		t.Fatal("an unrefilled gap kept stale blocks")
	}
	if s := ix.Stats("E"); s.Gaps != 2 || s.ReplayFailures != 1 {
		t.Fatalf("stats %+v, want a second gap, not refilled", s)
	}
}
