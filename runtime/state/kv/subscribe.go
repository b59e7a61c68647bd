package kv

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/runtime/plan"
)

// Reconnection backoff of a subscription whose publisher is unreachable or went away.
const (
	minBackoff  = 100 * time.Millisecond
	maxBackoff  = 5 * time.Second
	dialTimeout = 5 * time.Second
)

// Subscription is the set of running KV-event subscribers of a router.
type Subscription struct {
	wg sync.WaitGroup
}

// Wait blocks until every subscriber has stopped, after the context given to Subscribe
// is done.
func (s *Subscription) Wait() { s.wg.Wait() }

// Subscribe starts one subscriber per DP rank of every plan engine with kv_events, feeding
// ix, and returns at once. Rank r of an engine publishes at the endpoint's port plus r, as
// SGLang does; the engines bind and the router dials, so endpoints must name the engine's
// address rather than a wildcard. Subscribers run until ctx is done.
//
// A subscriber applies each message's events in order and keeps the index honest about
// what it cannot know: on a sequence gap, a sequence that goes backwards (the publisher
// restarted), a message it cannot decode, or a lost connection, it clears the rank's
// entries, since events were lost and the rank's ownership is unknown until it stores
// blocks again. It redials with a backoff from 100 ms to 5 s. ZMQ PUB/SUB has no replay
// here, so a freshly connected subscriber learns only blocks stored after it joined.
//
// zmq4's own automatic reconnect is not used (llm-d found it racy): each connection is a
// fresh socket.
func Subscribe(ctx context.Context, p *plan.Plan, ix *Index, log *slog.Logger) (*Subscription, error) {
	if log == nil {
		log = slog.Default()
	}
	var subs []*subscriber
	for _, e := range p.Engines {
		if e.KVEvents == nil {
			continue
		}
		for r := range max(e.DPSize, 1) {
			ep, err := rankEndpoint(e.KVEvents.Endpoint, r)
			if err != nil {
				return nil, fmt.Errorf("engine %s: %w", e.ID, err)
			}
			subs = append(subs, &subscriber{
				ix: ix, engine: e.ID, rank: r, endpoint: ep, topic: e.KVEvents.Topic, blockSize: BlockSize(e),
				log: log.With("engine", e.ID, "dp_rank", r, "endpoint", ep),
			})
		}
	}
	s := &Subscription{}
	for _, sub := range subs {
		s.wg.Go(func() { sub.run(ctx) })
	}
	return s, nil
}

// rankEndpoint returns the endpoint of DP rank r given rank 0's "tcp://host:port".
func rankEndpoint(base string, r int) (string, error) {
	addr, ok := strings.CutPrefix(base, "tcp://")
	if !ok {
		return "", fmt.Errorf("kv_events endpoint %q: only tcp:// is supported", base)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("kv_events endpoint %q: %w", base, err)
	}
	if host == "" || host == "*" || net.ParseIP(host).IsUnspecified() {
		return "", fmt.Errorf("kv_events endpoint %q: the router dials the engine's publisher, so name the engine's address, not a wildcard", base)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port+r > 65535 {
		return "", fmt.Errorf("kv_events endpoint %q: bad port for DP rank %d", base, r)
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port+r)), nil
}

// subscriber follows one engine rank's publisher.
type subscriber struct {
	ix        *Index
	engine    string
	rank      int
	endpoint  string
	topic     string
	blockSize int
	log       *slog.Logger

	warnedSize bool // a block size other than the configured one was reported
}

func (s *subscriber) run(ctx context.Context) {
	backoff := minBackoff
	failing := false
	for ctx.Err() == nil {
		received, err := s.session(ctx)
		// Whatever ended the connection, events may have been lost with it.
		s.ix.ClearRank(s.engine, s.rank)
		if ctx.Err() != nil {
			return
		}
		if received {
			backoff, failing = minBackoff, false
		}
		if !failing {
			s.log.Warn("kv events: subscription lost; entries of this rank cleared, reconnecting", "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// session dials the publisher and applies its messages until the connection fails. It
// reports whether any message arrived, which resets the backoff.
func (s *subscriber) session(ctx context.Context) (received bool, err error) {
	sock := zmq4.NewSub(ctx,
		zmq4.WithDialerMaxRetries(0), // run owns the retry loop and its backoff
		zmq4.WithDialerTimeout(dialTimeout),
		zmq4.WithLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)),
	)
	defer sock.Close()
	if err := sock.Dial(s.endpoint); err != nil {
		return false, err
	}
	if err := sock.SetOption(zmq4.OptionSubscribe, s.topic); err != nil {
		return false, fmt.Errorf("subscribing to topic %q: %w", s.topic, err)
	}
	s.log.Debug("kv events: subscribed")
	var last uint64
	for {
		msg, err := sock.Recv()
		if err != nil {
			return received, err
		}
		m, err := decodeMessage(msg.Frames)
		if err != nil {
			// The message's events are lost: the rank's state is unknown from here.
			s.log.Warn("kv events: undecodable message; entries of this rank cleared", "err", err)
			s.ix.ClearRank(s.engine, s.rank)
			continue
		}
		switch {
		case !received || m.seq == last+1:
		case m.seq == last:
			continue // a duplicate
		default: // a gap, or a restarted publisher counting from 0 again
			s.log.Info("kv events: sequence jumped; entries of this rank cleared", "from", last, "to", m.seq)
			s.ix.ClearRank(s.engine, s.rank)
		}
		received, last = true, m.seq
		s.checkBlockSize(m.events)
		s.ix.Apply(s.engine, s.rank, m.events...)
	}
}

// checkBlockSize warns once when the engine reports pages of another size than the plan
// says: the router's hashes of the prompt would then never match the engine's.
func (s *subscriber) checkBlockSize(events []Event) {
	if s.warnedSize {
		return
	}
	for _, e := range events {
		if e.Kind == BlockStored && e.BlockSize > 0 && e.BlockSize != s.blockSize {
			s.log.Warn("kv events: engine page size differs from the configured kv_events.block_size; prefix lookups will miss",
				"reported", e.BlockSize, "configured", s.blockSize)
			s.warnedSize = true
			return
		}
	}
}
