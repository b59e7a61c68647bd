package kv

import (
	"context"
	"encoding/binary"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv/zmtp"
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
	sock := zmq4.NewPub(context.Background(), zmq4.WithDialerRetry(20*time.Millisecond), zmq4.WithDialerMaxRetries(int(wait.Timeout/(20*time.Millisecond))))
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
	wait.For(t, "the router to receive a message", func() bool {
		if holds(ix, marker) {
			return true
		}
		pub.store(seq, marker)
		seq++
		return false
	})
	return seq
}

func TestBindModeRoutesByTopic(t *testing.T) {
	port := strconv.Itoa(freePort(t))
	kv := func(topic string) *plan.KVEvents {
		return &plan.KVEvents{Mode: plan.KVBind, Endpoint: "tcp://127.0.0.1:" + port, Topic: topic, BlockSize: 16}
	}
	p := &plan.Plan{Engines: []plan.Engine{
		{ID: "A", Model: "m", URL: "http://127.0.0.1:8000", KVEvents: kv("kv@A@m")},
		{ID: "B", Model: "m", URL: "http://127.0.0.1:8000", KVEvents: kv("kv@B@m")},
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
	wait.For(t, "the unknown topic counted", func() bool {
		stranger.store(0, 300)
		return ix.UnknownTopics() > 0
	})
	if holds(ix, 300) {
		t.Fatal("a message of an unknown topic was indexed")
	}

	// A gap without a replay endpoint drops A's blocks (and only A's) and is counted.
	a.store(seqA+5, 101)
	wait.For(t, "the block after the gap", func() bool { return holds(ix, 101) })
	if holds(ix, 100) || !holds(ix, 200) {
		t.Fatal("a gap kept A's stale blocks, or dropped B's")
	}
	if s := ix.Stats("A"); s.Gaps != 1 {
		t.Fatalf("A's gaps = %d, want 1", s.Gaps)
	}
}

// TestBindChangeKeepsTheNeighbours: when the engines bound to one endpoint change (one
// leaves, one joins), the engine that stayed keeps its connection, its sequence and what
// the index holds for it; the one that left is cleared; the new one is routed to.
func TestBindChangeKeepsTheNeighbours(t *testing.T) {
	port := strconv.Itoa(freePort(t))
	endpoint := "tcp://127.0.0.1:" + port
	engine := func(id string) plan.Engine {
		return plan.Engine{ID: id, Model: "m", URL: "http://127.0.0.1:8000", KVEvents: &plan.KVEvents{Mode: plan.KVBind, Endpoint: endpoint, Topic: "kv@" + id + "@m", BlockSize: 16}}
	}
	a, b, c, d := engine("A"), engine("B"), engine("C"), engine("D")
	ix := NewIndex(&plan.Plan{Engines: []plan.Engine{a, b, d}})
	ctx, cancel := context.WithCancel(t.Context())
	subs := NewSubscriptions(ctx, ix, slog.New(slog.DiscardHandler))
	defer func() { cancel(); subs.Wait() }()
	if errs := subs.Set([]plan.Engine{a, b, d}); len(errs) > 0 {
		t.Fatal(errs)
	}
	pubA, pubB, pubD := dialPub(t, endpoint, "kv@A@m"), dialPub(t, endpoint, "kv@B@m"), dialPub(t, endpoint, "kv@D@m")
	seqA := joinBind(t, pubA, ix, 0, 100)
	joinBind(t, pubB, ix, 0, 200)
	joinBind(t, pubD, ix, 0, 400)

	// B leaves, C joins, D changes (same topic, another block cap): only A is as it was.
	ix.AddEngine(c)
	d2 := engine("D")
	d2.KVEvents.MaxBlocks = 1000
	if errs := subs.Set([]plan.Engine{a, c, d2}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if !holds(ix, 100) {
		t.Fatal("the change cleared the engine that stayed")
	}
	if holds(ix, 200) {
		t.Fatal("the engine that left kept its blocks")
	}
	if holds(ix, 400) {
		t.Fatal("the changed engine kept the blocks its old feed vouched for")
	}
	if got := subs.Engines(); !slices.Equal(got, []string{"A", "C", "D"}) {
		t.Fatalf("subscribed engines %v, want [A C D]", got)
	}
	// A goes on where it was, over the same connection: no gap, nothing cleared.
	pubA.store(seqA, 101)
	wait.For(t, "A's next block", func() bool { return holds(ix, 101) })
	if s := ix.Stats("A"); s.Gaps != 0 || !holds(ix, 100) {
		t.Fatalf("A after the change: %d gaps, first block held %v", s.Gaps, holds(ix, 100))
	}
	joinBind(t, dialPub(t, endpoint, "kv@C@m"), ix, 0, 300)
	// B's publisher is a stranger now.
	before := ix.UnknownTopics()
	wait.For(t, "B's topic counted as unknown", func() bool {
		pubB.store(9, 201)
		time.Sleep(20 * time.Millisecond)
		return ix.UnknownTopics() > before
	})
	if holds(ix, 201) {
		t.Fatal("a message of the engine that left was indexed")
	}
}

// replayingEngine is an engine rank's publisher with vLLM's replay socket: a PUB for live
// batches and a ROUTER that resends buffered ones from a requested sequence number.
type replayingEngine struct {
	t      *testing.T
	pub    *publisher
	router zmq4.Socket

	mu     sync.Mutex
	buffer map[uint64][]byte
	starts []uint64 // the start of each replay request served
}

func newReplayingEngine(t *testing.T) *replayingEngine {
	t.Helper()
	e := &replayingEngine{t: t, pub: listen(t, "127.0.0.1:0"), buffer: map[uint64][]byte{}}
	e.router = zmq4.NewRouter(context.Background())
	if err := e.router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go e.serve(done)
	t.Cleanup(func() { e.router.Close(); <-done })
	return e
}

func (e *replayingEngine) replayEndpoint() string { return "tcp://" + e.router.Addr().String() }

// batch records a store of h under seq for replay and returns its payload.
func (e *replayingEngine) batch(seq uint64, h int64) []byte {
	payload := encode(e.t, []any{1.0, []any{[]any{"BlockStored", []any{h}, nil, []any{}, 16}}, 0})
	e.mu.Lock()
	e.buffer[seq] = payload
	e.mu.Unlock()
	return payload
}

// forget drops a batch from the replay buffer, as a full buffer drops its oldest.
func (e *replayingEngine) forget(seq uint64) {
	e.mu.Lock()
	delete(e.buffer, seq)
	e.mu.Unlock()
}

// served returns the starts of the replay requests served so far.
func (e *replayingEngine) served() []uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.starts)
}

// serve answers replay requests as vllm/distributed/kv_events.py's _service_replay does:
// every buffered batch from the start on, in order, then the end marker.
func (e *replayingEngine) serve(done chan struct{}) {
	defer close(done)
	for {
		msg, err := e.router.Recv()
		if err != nil {
			return
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[len(msg.Frames)-1])
		e.mu.Lock()
		seqs := slices.Sorted(maps.Keys(e.buffer))
		var out [][]byte
		for _, seq := range seqs {
			if seq >= start {
				out = append(out, binary.BigEndian.AppendUint64(nil, seq), e.buffer[seq])
			}
		}
		e.starts = append(e.starts, start)
		e.mu.Unlock()
		for i := 0; i < len(out); i += 2 {
			_ = e.router.Send(zmq4.NewMsgFrom(id, []byte{}, out[i], out[i+1]))
		}
		_ = e.router.Send(zmq4.NewMsgFrom(id, []byte{}, binary.BigEndian.AppendUint64(nil, endOfReplay), []byte{}))
	}
}

func subscribeReplaying(t *testing.T, eng *replayingEngine) *Index {
	t.Helper()
	p := &plan.Plan{Engines: []plan.Engine{{ID: "E", Model: "m", KVEvents: &plan.KVEvents{
		Endpoint: "tcp://" + eng.pub.addr, Topic: "kv@E", BlockSize: 16, ReplayEndpoint: eng.replayEndpoint()}}}}
	ix := NewIndex(p)
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := Subscribe(ctx, p, ix, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); sub.Wait() })
	return ix
}

func TestGapRefilledFromTheReplayEndpoint(t *testing.T) {
	eng := newReplayingEngine(t)
	ix := subscribeReplaying(t, eng)
	seq := join(t, eng.pub, ix, 0, 100)

	// Batches seq and seq+1 are lost on the live socket; seq+2 arrives and the subscriber
	// asks the replay endpoint for the missing two.
	eng.batch(seq, 1)
	eng.batch(seq+1, 2)
	eng.pub.send(seq+2, eng.batch(seq+2, 3))
	wait.For(t, "the block after the gap", func() bool { return holds(ix, 3) })
	if !slices.Contains(eng.served(), seq) {
		t.Fatalf("replays asked from %v, want one from %d", eng.served(), seq)
	}
	if !holds(ix, 1) || !holds(ix, 2) || !holds(ix, 100) {
		t.Fatal("the refill lost blocks: the missed batches or the earlier ones")
	}
	if s := ix.Stats("E"); s.Gaps != 1 || s.Replays != 1 || s.ReplayFailures != 0 {
		t.Fatalf("stats %+v, want one gap refilled", s)
	}

	// The publisher's buffer no longer has the missed batch: the refill fails and the
	// rank's blocks are dropped, as without a replay endpoint.
	eng.pub.send(seq+5, eng.batch(seq+5, 5))
	wait.For(t, "the block after the second gap", func() bool { return holds(ix, 5) })
	if holds(ix, 1) || holds(ix, 100) {
		t.Fatal("an unrefilled gap kept stale blocks")
	}
	if s := ix.Stats("E"); s.Gaps != 2 || s.ReplayFailures != 1 {
		t.Fatalf("stats %+v, want a second gap, not refilled", s)
	}
}

// TestJoinSyncsFromTheReplayEndpoint starts the subscriber after the engine published
// batches: its first live batch is not number 0, so it replays what the publisher still
// buffers and learns the blocks stored before it joined. A buffer that no longer starts
// at 0 still gives the blocks from its start on.
func TestJoinSyncsFromTheReplayEndpoint(t *testing.T) {
	eng := newReplayingEngine(t)
	eng.batch(0, 1) // dropped from the buffer, as by a full one
	eng.forget(0)
	eng.batch(1, 2)
	eng.batch(2, 3)
	ix := subscribeReplaying(t, eng)
	seq := uint64(3)
	wait.For(t, "the subscriber to receive a message", func() bool {
		if holds(ix, int64(100+seq-1)) {
			return true
		}
		eng.pub.send(seq, eng.batch(seq, int64(100+seq)))
		seq++
		return false
	})
	if !holds(ix, 2) || !holds(ix, 3) || holds(ix, 1) {
		t.Fatal("joining did not replay the buffered batches, or invented an unbuffered one")
	}
	if s := ix.Stats("E"); s.Syncs != 1 || s.Gaps != 0 || s.ReplayFailures != 0 {
		t.Fatalf("stats %+v, want one sync", s)
	}
	if got := eng.served(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("replays asked from %v, want one from 0", got)
	}
}

// TestBindPublisherLeavingKeepsTheNeighbours: publishers of several engines dial one bound
// endpoint. One of them breaking a limit after its handshake, or going away, clears the
// ranks it fed and nothing else: its neighbour keeps its connection, its sequence and its
// blocks. Before, either restarted the whole listener, which dropped every publisher's
// connection and cleared every engine on the endpoint (issue 28: killing one
// llm-d-inference-sim dropped its neighbour's 320 blocks).
func TestBindPublisherLeavingKeepsTheNeighbours(t *testing.T) {
	endpoint := "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))
	kv := func(topic string) *plan.KVEvents {
		return &plan.KVEvents{Mode: plan.KVBind, Endpoint: endpoint, Topic: topic, BlockSize: 16, MaxMessageBytes: 64 << 10}
	}
	p := &plan.Plan{Engines: []plan.Engine{
		{ID: "A", Model: "m", URL: "http://127.0.0.1:8000", KVEvents: kv("kv@A@m")},
		{ID: "B", Model: "m", URL: "http://127.0.0.1:8000", KVEvents: kv("kv@B@m")},
	}}
	ix, _ := subscribe(t, p)
	a, b := dialPub(t, endpoint, "kv@A@m"), dialPub(t, endpoint, "kv@B@m")
	joinBind(t, a, ix, 1, 100)
	seqB := joinBind(t, b, ix, 0, 200)

	// A breaks the message limit: its connection is closed and A's blocks dropped.
	big := make([]byte, 100<<10)
	if err := a.sock.Send(zmq4.NewMsgFrom([]byte(a.topic), binary.BigEndian.AppendUint64(nil, 99), big)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "A's blocks dropped after its violation", func() bool { return ix.Rejected(zmtp.TooLarge) == 1 && !holds(ix, 100) })
	if !holds(ix, 200) {
		t.Fatal("A's violation dropped B's blocks")
	}
	// B's connection is the one it had: its next batch follows on without a gap.
	b.store(seqB, 201)
	seqB++
	wait.For(t, "B's next block", func() bool { return holds(ix, 201) })

	// A publisher of A again, which then goes away: the same, by a disconnect.
	a2 := dialPub(t, endpoint, "kv@A@m")
	joinBind(t, a2, ix, 1, 110)
	a2.sock.Close()
	wait.For(t, "A's blocks dropped after its publisher left", func() bool { return !holds(ix, 110) })
	b.store(seqB, 202)
	wait.For(t, "B's block after A left", func() bool { return holds(ix, 202) })
	if !holds(ix, 200) || !holds(ix, 201) {
		t.Fatal("A's publisher leaving dropped B's blocks")
	}
	if s := ix.Stats("B"); s.Gaps != 0 {
		t.Fatalf("B saw %d sequence gaps, want 0: its connection was dropped", s.Gaps)
	}
}
