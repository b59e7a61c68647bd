package kv

import (
	"context"
	"fmt"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// dialer follows one engine rank's publisher in connect mode.
type dialer struct {
	feed     *feed
	endpoint string
	topic    string
	// goZeroMQ subscribes through go-zeromq's SUB socket rather than zmtp.Sub: the
	// switch back (engine_transport: net_http), the standard part zmtp.Sub replaces.
	goZeroMQ bool
	scratch  scratch // what its messages are decoded into, one at a time
}

func (d *dialer) run(ctx context.Context) {
	f := d.feed
	session := d.session
	if d.goZeroMQ {
		session = d.sessionZMQ4
	}
	retry(ctx, f.log, "subscription", session, func() {
		f.ix.ClearRank(f.engine, f.rank)
		f.reset()
	})
}

// session dials the publisher and applies its messages until the connection fails. It
// reports whether any message arrived, which resets the backoff. The messages are read
// and applied in this goroutine (see zmtp.Sub).
func (d *dialer) session(ctx context.Context) (received bool, err error) {
	sub, err := zmtp.DialSub(ctx, d.endpoint, d.feed.cfg, d.topic, dialTimeout)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	return d.follow(ctx, sub.Recv)
}

// sessionZMQ4 is session through go-zeromq's SUB socket.
func (d *dialer) sessionZMQ4(ctx context.Context) (received bool, err error) {
	sock := zmq4.NewSub(zmtp.WithConfig(ctx, d.feed.cfg),
		zmq4.WithDialerMaxRetries(0), // retry owns the loop and its backoff
		zmq4.WithDialerTimeout(dialTimeout),
		zmqLogger(d.feed.log),
	)
	defer sock.Close()
	if err := sock.Dial(zmtp.Endpoint(d.endpoint)); err != nil {
		return false, err
	}
	if err := sock.SetOption(zmq4.OptionSubscribe, d.topic); err != nil {
		return false, fmt.Errorf("subscribing to topic %q: %w", d.topic, err)
	}
	return d.follow(ctx, func() ([][]byte, error) {
		for {
			msg, err := sock.Recv()
			if err != nil || msg.Type == zmq4.UsrMsg { // not a command (a heartbeat)
				return msg.Frames, err
			}
		}
	})
}

// follow applies the messages recv returns until it fails, and reports whether any
// arrived.
func (d *dialer) follow(ctx context.Context, recv func() ([][]byte, error)) (received bool, err error) {
	d.feed.log.Debug("kv events: subscribed")
	for {
		frames, err := recv()
		if err != nil {
			return received, err
		}
		received = true
		m, err := decodeMessage(frames, &d.scratch)
		if err != nil {
			d.feed.undecodable(err)
			continue
		}
		d.feed.handle(ctx, m)
	}
}
