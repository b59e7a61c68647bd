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
}

func (d *dialer) run(ctx context.Context) {
	f := d.feed
	retry(ctx, f.log, "subscription", d.session, func() {
		f.ix.ClearRank(f.engine, f.rank)
		f.reset()
	})
}

// session dials the publisher and applies its messages until the connection fails. It
// reports whether any message arrived, which resets the backoff.
func (d *dialer) session(ctx context.Context) (received bool, err error) {
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
	d.feed.log.Debug("kv events: subscribed")
	for {
		msg, err := sock.Recv()
		if err != nil {
			return received, err
		}
		received = true
		if msg.Type != zmq4.UsrMsg {
			continue // a command (a heartbeat) after the handshake
		}
		m, err := decodeMessage(msg.Frames)
		if err != nil {
			d.feed.undecodable(err)
			continue
		}
		d.feed.handle(ctx, m)
	}
}
