package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// replayBufferSteps is how many past batches a rank keeps for its replay socket (vLLM
// and SGLang keep buffer_steps, 10 000 by default; the simulator needs fewer).
const replayBufferSteps = 1024

// publisher is one rank's ZMQ PUB socket, with an optional replay socket. Its sequence
// numbers start at 0, as SGLang's and vLLM's do.
type publisher struct {
	sock      zmq4.Socket
	endpoint  string
	topic     []byte
	dpRank    int
	blockSize int
	encoding  string      // a plan.Encoding* name; "" is SGLang's
	vllm      *vllmHasher // the vLLM encodings' block names
	// drop reports whether batches are to be lost on the wire (the DropKVEvents fault):
	// numbered and kept for replay, but not sent.
	drop func() bool

	mu     sync.Mutex // guards seq and buffer against the replay server
	seq    uint64
	buffer []replayEntry // the last replayBufferSteps batches, oldest first
	replay *replayServer // nil without a replay endpoint
}

// replayEntry is one published batch as the replay socket resends it.
type replayEntry struct {
	seq     uint64
	payload []byte
}

// pubConfig is how one rank publishes.
type pubConfig struct {
	endpoint  string // "tcp://host:port" to bind (port 0: any free port) or dial
	dial      bool   // connect to a router listening at endpoint instead of binding
	replay    string // endpoint to bind the replay socket at, "" for none
	topic     string
	dpRank    int
	blockSize int
	encoding  string // a plan.Encoding* name
	seed      string // vLLM's hash seed
	drop      func() bool
}

// newPublisher binds a PUB socket at the endpoint, as SGLang and vLLM do for a wildcard
// endpoint, or with dial set connects it to a router listening there, as they (and
// llm-d's simulator) do for a named host. A dialing publisher connects in the background
// and reconnects, so it may start before the router listens; batches published while it
// is not connected are lost.
func newPublisher(c pubConfig) (*publisher, error) {
	p := &publisher{topic: []byte(c.topic), dpRank: c.dpRank, blockSize: c.blockSize, encoding: c.encoding, drop: c.drop}
	if c.encoding == plan.EncodingVLLMArray || c.encoding == plan.EncodingVLLMMap {
		p.vllm = newVLLMHasher(c.seed)
	}
	if c.dial {
		p.sock = zmq4.NewPub(context.Background(), zmq4.WithDialerMaxRetries(-1),
			zmq4.WithDialerRetry(100*time.Millisecond), zmq4.WithAutomaticReconnect(true))
		p.endpoint = c.endpoint
		go func() { _ = p.sock.Dial(zmtp.Endpoint(c.endpoint)) }() // returns once connected, or closed
	} else {
		p.sock = zmq4.NewPub(context.Background())
		if err := p.sock.Listen(zmtp.Endpoint(c.endpoint)); err != nil {
			p.sock.Close()
			return nil, fmt.Errorf("kv events: %w", err)
		}
		p.endpoint = "tcp://" + p.sock.Addr().String()
	}
	if c.replay != "" {
		rs, err := newReplayServer(c.replay, p)
		if err != nil {
			p.sock.Close()
			return nil, err
		}
		p.replay = rs
	}
	return p, nil
}

// publish sends one batch as the three frames (topic, 8-byte big-endian sequence, payload).
// The PUB socket only queues the message, so publish does not wait for subscribers.
func (p *publisher) publish(events []kvEvent) error {
	var payload []byte
	var err error
	switch p.encoding {
	case plan.EncodingVLLMArray, plan.EncodingVLLMMap:
		payload, err = p.vllm.encodeBatch(time.Now(), events, p.dpRank, p.blockSize, p.encoding == plan.EncodingVLLMMap)
	default:
		payload, err = encodeBatch(time.Now(), events, p.dpRank, p.blockSize)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	seq := p.seq
	p.seq++
	if p.replay != nil {
		if len(p.buffer) == replayBufferSteps {
			p.buffer = append(p.buffer[:0], p.buffer[1:]...)
		}
		p.buffer = append(p.buffer, replayEntry{seq: seq, payload: payload})
	}
	p.mu.Unlock()
	if p.drop != nil && p.drop() {
		return nil
	}
	if err := p.sock.Send(zmq4.NewMsgFrom(p.topic, binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
		return fmt.Errorf("publish kv events on %s: %w", p.endpoint, err)
	}
	return nil
}

// since returns the buffered batches from seq on, for the replay server.
func (p *publisher) since(seq uint64) []replayEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []replayEntry
	for _, e := range p.buffer {
		if e.seq >= seq {
			out = append(out, e)
		}
	}
	return out
}

func (p *publisher) close() error {
	err := p.sock.Close()
	if p.replay != nil {
		err = errors.Join(err, p.replay.close())
	}
	return err
}
