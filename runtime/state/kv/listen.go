package kv

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/go-zeromq/zmq4"
)

// maxLoggedTopics bounds how many distinct unknown topics a listener logs, since
// publishers, not the configuration, choose them.
const maxLoggedTopics = 16

// listener is a bound SUB socket that publishers dial, in bind mode. It serves one DP rank
// of every engine configured with its endpoint and routes each message by its topic.
type listener struct {
	ix       *Index
	endpoint string
	feeds    map[string]*feed // by topic, fixed at construction
	log      *slog.Logger

	logged map[string]bool // unknown topics already logged
}

func (l *listener) run(ctx context.Context) {
	retry(ctx, l.log, "listener", l.session, func() {
		for _, f := range l.feeds {
			f.ix.ClearRank(f.engine, f.rank)
			f.reset()
		}
	})
}

// session listens and applies messages until the socket fails.
func (l *listener) session(ctx context.Context) (received bool, err error) {
	sock := zmq4.NewSub(ctx, zmqLogger(l.log))
	defer sock.Close()
	if err := sock.Listen(l.endpoint); err != nil {
		return false, err
	}
	// Subscribe to everything: the topic routes, and one unknown to the configuration is
	// counted rather than silently filtered away.
	if err := sock.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return false, fmt.Errorf("subscribing: %w", err)
	}
	l.log.Debug("kv events: listening")
	for {
		msg, err := sock.Recv()
		if err != nil {
			return received, err
		}
		received = true
		if len(msg.Frames) == 0 {
			continue
		}
		f := l.feeds[string(msg.Frames[0])]
		if f == nil {
			l.unknown(msg.Frames)
			continue
		}
		m, err := decodeMessage(msg.Frames)
		if err != nil {
			f.undecodable(err)
			continue
		}
		f.handle(ctx, m)
	}
}

func (l *listener) unknown(frames [][]byte) {
	l.ix.unknownTopics.add(1)
	topic := string(frames[0])
	if l.logged == nil {
		l.logged = map[string]bool{}
	}
	if l.logged[topic] || len(l.logged) >= maxLoggedTopics {
		return
	}
	l.logged[topic] = true
	var seq uint64
	if len(frames) > 1 && len(frames[1]) == 8 {
		seq = binary.BigEndian.Uint64(frames[1])
	}
	l.log.Warn("kv events: message with a topic no engine is configured with; set kv_events.topic of the engine that sends it",
		"topic", topic, "seq", seq)
}
