package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// replayTimeout bounds one refill: dialling the replay endpoint and reading every batch
// it sends back. Events keep queueing on the live socket meanwhile.
const replayTimeout = 2 * time.Second

// endOfReplay is the sequence number SGLang's and vLLM's publishers send after the last
// replayed batch: -1 as 8 big-endian bytes.
const endOfReplay = ^uint64(0)

// refill asks the rank's replay endpoint for batches from..to-1 and applies them in
// order. The publisher's ROUTER socket answers a request [empty, from as 8 big-endian
// bytes] from a DEALER with one [empty, seq, payload] message per buffered batch at or
// after from, then [empty, -1, empty] (vllm/distributed/kv_events.py, _service_replay).
// It reports whether every missing batch was applied, or with partial whether the
// batches from the buffer's start on were; a refill that falls short leaves the rank for
// the caller to clear.
func (f *feed) refill(ctx context.Context, from, to uint64, partial bool) bool {
	err := f.replayRange(ctx, from, to, partial)
	if err != nil {
		f.log.Warn("kv events: replay failed", "endpoint", f.replay, "from", from, "err", err)
	}
	return err == nil
}

func (f *feed) replayRange(ctx context.Context, from, to uint64, partial bool) error {
	ctx, cancel := context.WithTimeout(ctx, replayTimeout)
	defer cancel()
	sock := zmq4.NewDealer(zmtp.WithConfig(ctx, f.cfg), zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(replayTimeout),
		zmqLogger(f.log))
	defer sock.Close()
	if err := sock.Dial(zmtp.Endpoint(f.replay)); err != nil {
		return err
	}
	if err := sock.Send(zmq4.NewMsgFrom([]byte{}, binary.BigEndian.AppendUint64(nil, from))); err != nil {
		return fmt.Errorf("sending the replay request: %w", err)
	}
	next := from
	for {
		msg, err := recvCtx(ctx, sock)
		if err != nil {
			return fmt.Errorf("reading replayed batches: %w", err)
		}
		if msg.Type != zmq4.UsrMsg {
			continue // a command (a heartbeat) after the handshake
		}
		fr := msg.Frames
		if len(fr) == 3 && len(fr[0]) == 0 {
			fr = fr[1:] // the DEALER keeps the ROUTER's empty delimiter
		}
		if len(fr) != 2 || len(fr[0]) != 8 {
			return fmt.Errorf("replayed message has %d frames, want [seq, payload]", len(fr))
		}
		seq := binary.BigEndian.Uint64(fr[0])
		switch {
		case seq == endOfReplay:
			if next < to && !(partial && next == from) {
				return fmt.Errorf("the publisher's buffer ended at %d, before %d", next, to)
			}
			return nil
		case seq < next || seq >= to:
			continue // already applied, or what the live socket delivers
		case seq > next && (!partial || next > from):
			return fmt.Errorf("the publisher's buffer lacks batch %d (it starts at %d)", next, seq)
		}
		m, err := decodeMessage([][]byte{nil, fr[0], fr[1]}, nil) // the live message waits in the scratch
		if err != nil {
			return fmt.Errorf("replayed batch %d: %w", seq, err)
		}
		f.info.stats.skipped.add(m.skipped)
		f.apply(m)
		next = seq + 1
	}
}

// recvCtx is sock.Recv bounded by ctx, for sockets whose Recv may not return when their
// peer stays silent.
func recvCtx(ctx context.Context, sock zmq4.Socket) (zmq4.Msg, error) {
	type result struct {
		msg zmq4.Msg
		err error
	}
	ch := make(chan result, 1)
	go func() {
		msg, err := sock.Recv()
		ch <- result{msg, err}
	}()
	select {
	case r := <-ch:
		return r.msg, r.err
	case <-ctx.Done():
		return zmq4.Msg{}, errors.Join(ctx.Err(), sock.Close())
	}
}
