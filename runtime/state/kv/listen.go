package kv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// maxLoggedTopics bounds how many distinct unknown topics a listener logs, since
// publishers, not the configuration, choose them.
const maxLoggedTopics = 16

// listener is a bound SUB socket that publishers dial, in bind mode. It serves one DP rank
// of every engine configured with its endpoint and routes each message by its topic.
type listener struct {
	ix       *Index
	endpoint string
	log      *slog.Logger
	cfg      *zmtp.Config // its connections' bounds; Allow reads allow
	allow    atomic.Pointer[allowList]

	// mu guards feeds and is held while a message is applied, so that once swap
	// returns, no feed it dropped is written to again.
	mu      sync.Mutex
	feeds   map[string]*feed // by topic
	logged  map[string]bool  // unknown topics already logged
	scratch scratch          // what messages are decoded into, under mu
}

func newListener(ix *Index, endpoint string, log *slog.Logger) *listener {
	l := &listener{ix: ix, endpoint: endpoint, log: log, feeds: map[string]*feed{}}
	l.cfg = &zmtp.Config{Allow: func(ip netip.Addr) bool { return l.allow.Load().allows(ip) },
		Reject: (&rejections{ix: ix, log: log}).report}
	return l
}

func (l *listener) run(ctx context.Context) {
	retry(ctx, l.log, "listener", l.session, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, f := range l.feeds {
			f.ix.ClearRank(f.engine, f.rank)
			f.reset()
		}
	})
}

// swap makes the feeds and the allow-list of next, built for the same endpoint, the
// running listener's, for a change of the engines bound to it (see
// Subscription.rebind). The running feed of a topic whose engine keep reports
// unchanged stays, with its sequence, so the engines beside a changed one keep what the
// index knows of them; a feed that is dropped has its rank cleared, since nothing vouches
// for it any more.
func (l *listener) swap(next *listener, keep func(engine string) bool) {
	l.allow.Store(next.allow.Load())
	feeds := next.feeds
	l.mu.Lock()
	defer l.mu.Unlock()
	for topic, f := range feeds {
		if old := l.feeds[topic]; old != nil && old.engine == f.engine && old.rank == f.rank && keep(f.engine) {
			feeds[topic] = old
		}
	}
	for topic, old := range l.feeds {
		if feeds[topic] != old {
			old.ix.ClearRank(old.engine, old.rank)
		}
	}
	l.feeds = feeds
}

// session listens and applies messages until the socket fails. A publisher's connection
// ending (it left, restarted, or broke a limit) is not the socket failing: only the
// ranks that publisher fed are cleared (see left), and the others keep their state.
func (l *listener) session(ctx context.Context) (received bool, err error) {
	sock := zmq4.NewSub(zmtp.WithConfig(ctx, l.cfg), zmqLogger(l.log))
	defer sock.Close()
	if err := sock.Listen(zmtp.Endpoint(l.endpoint)); err != nil {
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
		var ended *zmtp.ConnError
		if errors.As(err, &ended) && ctx.Err() == nil {
			l.left(ended)
			continue
		}
		if err != nil {
			return received, err
		}
		received = true
		if msg.Type == zmq4.UsrMsg && len(msg.Frames) > 0 {
			l.apply(ctx, msg.Frames)
		}
	}
}

// left clears the ranks a publisher that left fed, and resets their sequences for the
// connection that replaces it; every rank when it fed more topics than its connection
// recorded. zmq4 hands over a connection's end after its last message, so nothing it
// sent is applied after this.
func (l *listener) left(ended *zmtp.ConnError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var cleared []string
	for topic, f := range l.feeds {
		if ended.AllTopics || slices.Contains(ended.Topics, topic) {
			f.ix.ClearRank(f.engine, f.rank)
			f.reset()
			cleared = append(cleared, topic)
		}
	}
	if len(cleared) > 0 {
		slices.Sort(cleared)
		l.log.Info("kv events: a publisher's connection ended; entries of its topics cleared",
			"peer", ended.Peer, "topics", cleared, "err", ended.Err)
	}
}

// apply routes one message to its topic's feed.
func (l *listener) apply(ctx context.Context, frames [][]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.feeds[string(frames[0])]
	if f == nil {
		l.unknown(frames)
		return
	}
	m, err := decodeMessage(frames, &l.scratch)
	if err != nil {
		f.undecodable(err)
		return
	}
	f.handle(ctx, m)
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
