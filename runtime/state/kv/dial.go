package kv

import (
	"context"
	"fmt"

	"github.com/go-zeromq/zmq4"
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
	sock := zmq4.NewSub(ctx,
		zmq4.WithDialerMaxRetries(0), // retry owns the loop and its backoff
		zmq4.WithDialerTimeout(dialTimeout),
		zmqLogger(d.feed.log),
	)
	defer sock.Close()
	if err := sock.Dial(d.endpoint); err != nil {
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
		m, err := decodeMessage(msg.Frames)
		if err != nil {
			d.feed.undecodable(err)
			continue
		}
		d.feed.handle(ctx, m)
	}
}
