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
	wg        sync.WaitGroup
	listeners map[string]*listener // bind mode, by bound endpoint
}

// Wait blocks until every subscriber has stopped, after the context given to Subscribe
// is done.
func (s *Subscription) Wait() { s.wg.Wait() }

// Subscribe starts the KV-event subscribers of the plan's engines, feeding ix, and
// returns at once. They run until ctx is done.
//
// An engine in connect mode gets one subscriber per DP rank, which dials the engine's
// publisher: rank r at the endpoint's port plus r, as SGLang and vLLM bind them. An
// engine in bind mode dials the router instead: the router listens on the endpoint's
// port plus r for rank r of every engine configured with that port, and tells the engines
// apart by the message topic, which must equal the engine's kv_events.topic.
//
// Each rank's messages are applied in sequence order (see feed). A subscriber that loses
// its connection clears the ranks it fed, since events may have been lost with it, and
// redials or listens again with a backoff from 100 ms to 5 s. zmq4's own automatic
// reconnect is not used (llm-d found it racy): each attempt is a fresh socket.
func Subscribe(ctx context.Context, p *plan.Plan, ix *Index, log *slog.Logger) (*Subscription, error) {
	runs, listeners, err := subscribers(p, ix, log)
	if err != nil {
		return nil, err
	}
	s := &Subscription{listeners: listeners}
	for _, run := range runs {
		s.wg.Go(func() { run(ctx) })
	}
	return s, nil
}

// rebind gives the running listeners the feeds and allow-lists of p's engines, every one
// of them bound to those listeners, keeping the feed of each engine keep reports
// unchanged (see listener.swap). It reports false, changing nothing, when p's engines
// need other subscribers (another port, another number of ranks, another message limit,
// or a dialer): the caller then restarts the subscription.
func (s *Subscription) rebind(p *plan.Plan, ix *Index, log *slog.Logger, keep func(engine string) bool) (bool, error) {
	runs, listeners, err := subscribers(p, ix, log)
	if err != nil || len(runs) != len(listeners) || len(listeners) != len(s.listeners) {
		return false, err
	}
	for ep, l := range listeners {
		if s.listeners[ep] == nil || s.listeners[ep].cfg.MaxMessageBytes != l.cfg.MaxMessageBytes {
			return false, nil
		}
	}
	for ep, l := range listeners {
		s.listeners[ep].swap(l, keep)
	}
	return true, nil
}

// subscribers builds, without starting them, the subscribers of the plan's engines: a
// run per dialer and per listener, and the listeners by bound endpoint.
func subscribers(p *plan.Plan, ix *Index, log *slog.Logger) ([]func(context.Context), map[string]*listener, error) {
	if log == nil {
		log = slog.Default()
	}
	var runs []func(context.Context)
	listeners := map[string]*listener{} // by bound endpoint
	allowed := map[string]allowList{}   // by bound endpoint
	var order []string
	for _, e := range p.Engines {
		kv := e.KVEvents
		if kv == nil {
			continue
		}
		var allow allowList // resolved once for the engine's ranks
		if kv.Mode == plan.KVBind {
			allow = allowFrom(e, log)
		}
		for r := range max(e.DPSize, 1) {
			f := &feed{ix: ix, info: ix.m().engines[e.ID], engine: e.ID, rank: r, blockSize: BlockSize(e)}
			f.log = log.With("engine", e.ID, "dp_rank", r)
			f.cfg = dialConfig(kv, &rejections{ix: ix, log: f.log})
			if kv.ReplayEndpoint != "" {
				rep, err := rankEndpoint(kv.ReplayEndpoint, r)
				if err != nil {
					return nil, nil, fmt.Errorf("engine %s: replay_endpoint: %w", e.ID, err)
				}
				f.replay = rep
			}
			if kv.Mode == plan.KVBind {
				ep, err := bindEndpoint(kv.Endpoint, r)
				if err != nil {
					return nil, nil, fmt.Errorf("engine %s: %w", e.ID, err)
				}
				l := listeners[ep]
				if l == nil {
					l = newListener(ix, ep, log.With("listen", ep))
					listeners[ep] = l
					order = append(order, ep)
				}
				l.cfg.MaxMessageBytes = max(l.cfg.MaxMessageBytes, kv.MaxMessageBytes)
				allowed[ep] = append(allowed[ep], allow...)
				if _, dup := l.feeds[kv.Topic]; dup {
					return nil, nil, fmt.Errorf("engine %s: topic %q is used by another engine bound to %s", e.ID, kv.Topic, ep)
				}
				f.log = f.log.With("listen", ep, "topic", kv.Topic)
				l.feeds[kv.Topic] = f
				continue
			}
			ep, err := rankEndpoint(kv.Endpoint, r)
			if err != nil {
				return nil, nil, fmt.Errorf("engine %s: %w", e.ID, err)
			}
			f.log = f.log.With("endpoint", ep)
			d := &dialer{feed: f, endpoint: ep, topic: kv.Topic, goZeroMQ: p.EngineTransport == plan.TransportNetHTTP}
			runs = append(runs, d.run)
		}
	}
	for _, ep := range order {
		a := allowed[ep]
		listeners[ep].allow.Store(&a)
		runs = append(runs, listeners[ep].run)
	}
	return runs, listeners, nil
}

// rankEndpoint returns the endpoint of DP rank r given rank 0's "tcp://host:port".
func rankEndpoint(base string, r int) (string, error) {
	host, port, err := splitEndpoint(base, r)
	if err != nil {
		return "", err
	}
	if host == "" || host == "*" || net.ParseIP(host).IsUnspecified() {
		return "", fmt.Errorf("kv_events endpoint %q: the router dials the engine's publisher, so name the engine's address, not a wildcard", base)
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// bindEndpoint returns the endpoint the router listens on for DP rank r; a wildcard host
// ("*", as the engines write it) means every interface.
func bindEndpoint(base string, r int) (string, error) {
	host, port, err := splitEndpoint(base, r)
	if err != nil {
		return "", err
	}
	if host == "*" || host == "" {
		host = "0.0.0.0"
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port)), nil
}

func splitEndpoint(base string, r int) (string, int, error) {
	addr, ok := strings.CutPrefix(base, "tcp://")
	if !ok {
		return "", 0, fmt.Errorf("kv_events endpoint %q: only tcp:// is supported", base)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("kv_events endpoint %q: %w", base, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port+r > 65535 {
		return "", 0, fmt.Errorf("kv_events endpoint %q: bad port for DP rank %d", base, r)
	}
	return host, port + r, nil
}

// retry runs session until ctx is done, waiting with a growing backoff after failures.
// A session that received something resets the backoff; failures are logged once until
// the next success.
func retry(ctx context.Context, log *slog.Logger, what string, session func(context.Context) (bool, error), lost func()) {
	backoff := minBackoff
	failing := false
	for ctx.Err() == nil {
		received, err := session(ctx)
		lost()
		if ctx.Err() != nil {
			return
		}
		if received {
			backoff, failing = minBackoff, false
		}
		if !failing {
			log.Warn("kv events: "+what+" lost; entries cleared, retrying", "err", err)
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

func zmqLogger(log *slog.Logger) zmq4.Option {
	return zmq4.WithLogger(slog.NewLogLogger(log.Handler(), slog.LevelDebug))
}
