package kv

import (
	"context"
	"encoding/binary"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

func TestRankEndpoint(t *testing.T) {
	tests := []struct {
		base string
		rank int
		want string // or an error substring after "error: "
	}{
		{base: "tcp://10.0.0.5:5557", rank: 0, want: "tcp://10.0.0.5:5557"},
		{base: "tcp://10.0.0.5:5557", rank: 3, want: "tcp://10.0.0.5:5560"},
		{base: "tcp://engine-1.local:5557", rank: 1, want: "tcp://engine-1.local:5558"},
		{base: "tcp://[::1]:5557", rank: 1, want: "tcp://[::1]:5558"},
		{base: "tcp://*:5557", want: "error: not a wildcard"},
		{base: "tcp://0.0.0.0:5557", want: "error: not a wildcard"},
		{base: "ipc:///tmp/kv", want: "error: only tcp:// is supported"},
		{base: "tcp://10.0.0.5", want: "error: missing port"},
		{base: "tcp://10.0.0.5:65535", rank: 1, want: "error: bad port for DP rank 1"},
	}
	for _, tt := range tests {
		got, err := rankEndpoint(tt.base, tt.rank)
		if msg, ok := strings.CutPrefix(tt.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), msg) {
				t.Errorf("rankEndpoint(%q, %d) = %q, %v; want an error containing %q", tt.base, tt.rank, got, err, msg)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("rankEndpoint(%q, %d) = %q, %v; want %q", tt.base, tt.rank, got, err, tt.want)
		}
	}
}

func TestSubscribeRejectsBadEndpoints(t *testing.T) {
	p := &plan.Plan{Engines: []plan.Engine{{ID: "E", KVEvents: &plan.KVEvents{Endpoint: "tcp://*:5557"}}}}
	if _, err := Subscribe(t.Context(), p, NewIndex(p), nil); err == nil || !strings.Contains(err.Error(), "engine E: ") {
		t.Fatalf("err = %v, want the engine's endpoint rejected", err)
	}
}

// publisher is a hand-driven PUB socket standing in for an engine rank.
type publisher struct {
	t    *testing.T
	sock zmq4.Socket
	addr string
}

func listen(t *testing.T, addr string) *publisher {
	t.Helper()
	sock := zmq4.NewPub(context.Background())
	if err := sock.Listen("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	p := &publisher{t: t, sock: sock, addr: sock.Addr().String()}
	t.Cleanup(func() { sock.Close() })
	return p
}

func (p *publisher) send(seq uint64, payload []byte) {
	p.t.Helper()
	if err := p.sock.Send(zmq4.NewMsgFrom([]byte("kv@E"), binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
		p.t.Fatal(err)
	}
}

func (p *publisher) store(seq uint64, h int64) {
	p.t.Helper()
	p.send(seq, encode(p.t, []any{1.0, []any{[]any{"BlockStored", []any{h}, nil, []any{}, 16}}, 0}))
}

func holds(ix *Index, h int64) bool { return len(ix.LookupHashes([]int64{h}, 16)) > 0 }

// join beats ZMQ's slow joiner: a PUB socket drops messages until the subscription has
// reached it, so publish a marker block with increasing sequence numbers until the index
// shows it. It returns the next sequence number.
func join(t *testing.T, pub *publisher, ix *Index, seq uint64, marker int64) uint64 {
	t.Helper()
	wait.For(t, "the subscriber's first message", func() bool {
		if holds(ix, marker) {
			return true
		}
		pub.store(seq, marker)
		seq++
		return false
	})
	return seq
}

// subReaders are the engine transports, which choose the reader of a dialled publisher:
// zmtp.Sub, and go-zeromq's SUB socket, the switch back.
var subReaders = []plan.EngineTransport{plan.TransportRouter, plan.TransportNetHTTP}

func TestSubscriberSequencesAndReconnects(t *testing.T) {
	for _, transport := range subReaders {
		t.Run(string(transport), func(t *testing.T) { testSequencesAndReconnects(t, transport) })
	}
}

func testSequencesAndReconnects(t *testing.T, transport plan.EngineTransport) {
	pub := listen(t, "127.0.0.1:0")
	p := &plan.Plan{EngineTransport: transport, Engines: []plan.Engine{{ID: "E", Model: "m", KVEvents: &plan.KVEvents{
		Endpoint: "tcp://" + pub.addr, Topic: "kv@E", BlockSize: 16}}}}
	ix := NewIndex(p)
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := Subscribe(ctx, p, ix, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); sub.Wait() }()

	seq := join(t, pub, ix, 5, 100) // a late joiner accepts whatever sequence comes first

	pub.store(seq, 1)
	wait.For(t, "the next block", func() bool { return holds(ix, 1) })
	if !holds(ix, 100) {
		t.Fatal("consecutive messages lost earlier blocks")
	}

	// A gap: the rank's entries are unknown, so they are dropped before applying.
	pub.store(seq+2, 2)
	wait.For(t, "the block after a gap", func() bool { return holds(ix, 2) })
	if holds(ix, 1) || holds(ix, 100) {
		t.Fatal("a sequence gap kept entries of unknown state")
	}

	// A restarted publisher counts from 0 again.
	pub.store(0, 3)
	wait.For(t, "the block after a restart", func() bool { return holds(ix, 3) })
	if holds(ix, 2) {
		t.Fatal("a restarted publisher's old entries were kept")
	}

	// A duplicate is skipped; the next message shows it was read.
	pub.store(0, 4)
	pub.store(1, 5)
	wait.For(t, "the block after a duplicate", func() bool { return holds(ix, 5) })
	if holds(ix, 4) || !holds(ix, 3) {
		t.Fatal("a duplicate was applied, or cleared the rank")
	}

	// An undecodable message loses its events: the rank is cleared.
	pub.send(2, []byte{0xc1})
	pub.store(3, 6)
	wait.For(t, "the block after a bad message", func() bool { return holds(ix, 6) })
	if holds(ix, 3) || holds(ix, 5) {
		t.Fatal("an undecodable message kept entries")
	}

	// The publisher goes away: the rank is cleared. It comes back on the same port and the
	// subscriber redials.
	addr := pub.addr
	pub.sock.Close()
	wait.For(t, "the rank cleared after the connection dropped", func() bool { return !holds(ix, 6) })
	pub = listen(t, addr)
	join(t, pub, ix, 0, 7)
}

func TestSubscribePerDPRank(t *testing.T) {
	// Rank r listens at the base port plus r. Find two consecutive free ports.
	var pubs [2]*publisher
	for attempt := 0; ; attempt++ {
		p0 := listen(t, "127.0.0.1:0")
		port, _ := strconv.Atoi(p0.addr[strings.LastIndex(p0.addr, ":")+1:])
		sock := zmq4.NewPub(context.Background())
		if err := sock.Listen("tcp://127.0.0.1:" + strconv.Itoa(port+1)); err == nil {
			pubs = [2]*publisher{p0, {t: t, sock: sock, addr: sock.Addr().String()}}
			t.Cleanup(func() { sock.Close() })
			break
		}
		sock.Close()
		if attempt == 10 {
			t.Fatal("no two consecutive free ports")
		}
	}
	p := &plan.Plan{Engines: []plan.Engine{{ID: "E", Model: "m", DPSize: 2, KVEvents: &plan.KVEvents{
		Endpoint: "tcp://" + pubs[0].addr, Topic: "kv@E"}}}}
	ix := NewIndex(p)
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := Subscribe(ctx, p, ix, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); sub.Wait() }()
	join(t, pubs[0], ix, 0, 10)
	join(t, pubs[1], ix, 0, 11)
	// Each rank's entries are its own: clearing rank 1 keeps rank 0's.
	pubs[1].send(1000, encode(t, []any{1.0, []any{[]any{"AllBlocksCleared"}}, 1}))
	wait.For(t, "rank 1 cleared", func() bool { return !holds(ix, 11) })
	if !holds(ix, 10) {
		t.Fatal("rank 1's clear dropped rank 0's blocks")
	}
}
