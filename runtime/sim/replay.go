package sim

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// endOfReplay is the sequence number that ends a replay: -1 as 8 big-endian bytes.
const endOfReplay = ^uint64(0)

// replayServer is a rank's replay socket, as vLLM's and SGLang's ZmqEventPublisher bind
// it (_service_replay in vllm/distributed/kv_events.py): a ROUTER that, asked with
// [identity, "", start seq as 8 big-endian bytes], answers [identity, "", seq, payload]
// for every buffered batch from start on, then [identity, "", -1, ""].
type replayServer struct {
	sock     zmq4.Socket
	endpoint string
	pub      *publisher
	done     chan struct{}
}

func newReplayServer(endpoint string, pub *publisher) (*replayServer, error) {
	sock := zmq4.NewRouter(context.Background())
	if err := sock.Listen(zmtp.Endpoint(endpoint)); err != nil {
		sock.Close()
		return nil, fmt.Errorf("kv events replay: %w", err)
	}
	rs := &replayServer{sock: sock, endpoint: "tcp://" + sock.Addr().String(), pub: pub, done: make(chan struct{})}
	go rs.serve()
	return rs, nil
}

func (rs *replayServer) serve() {
	defer close(rs.done)
	for {
		msg, err := rs.sock.Recv()
		if err != nil {
			return // closed
		}
		// vLLM accepts exactly [identity, "", start] and ignores anything else.
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			continue
		}
		id := msg.Frames[0]
		for _, e := range rs.pub.since(binary.BigEndian.Uint64(msg.Frames[2])) {
			if rs.sock.Send(zmq4.NewMsgFrom(id, []byte{}, binary.BigEndian.AppendUint64(nil, e.seq), e.payload)) != nil {
				break
			}
		}
		_ = rs.sock.Send(zmq4.NewMsgFrom(id, []byte{}, binary.BigEndian.AppendUint64(nil, endOfReplay), []byte{}))
	}
}

func (rs *replayServer) close() error {
	err := rs.sock.Close()
	<-rs.done
	return err
}
