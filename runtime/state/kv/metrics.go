package kv

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// counter is a monotonic event count.
type counter struct{ n atomic.Uint64 }

func (c *counter) add(n int) { c.n.Add(uint64(n)) }

// Load returns the count.
func (c *counter) Load() uint64 { return c.n.Load() }

// engineStats counts what the index and its subscribers could not use of an engine's
// events, so an operator sees why an engine's prefixes go unmatched.
type engineStats struct {
	gaps           counter // sequence gaps and publisher restarts seen
	replays        counter // gaps refilled from the replay endpoint
	syncs          counter // joins that replayed the rank's earlier batches
	replayFailures counter // gaps the replay endpoint could not refill
	undecodable    counter // messages that could not be decoded
	skipped        counter // events of unknown kinds, skipped
	malformed      counter // stores whose token ids do not fit their blocks
	orphans        counter // stored blocks whose parent the rank does not hold
	foreign        counter // stored blocks hashed with more than their tokens
	evicted        counter // blocks dropped at the rank's max_blocks
}

// EngineStats is a snapshot of one engine's KV-event counters.
type EngineStats struct {
	Gaps, Replays, Syncs, ReplayFailures, Undecodable, Skipped, Malformed, Orphans, Foreign, Evicted uint64
}

// Stats returns the engine's counters, zero for an engine the index does not know.
func (ix *Index) Stats(engineID string) EngineStats {
	info := ix.m().engines[engineID]
	if info == nil {
		return EngineStats{}
	}
	s := &info.stats
	return EngineStats{
		Gaps: s.gaps.Load(), Replays: s.replays.Load(), Syncs: s.syncs.Load(), ReplayFailures: s.replayFailures.Load(),
		Undecodable: s.undecodable.Load(), Skipped: s.skipped.Load(), Malformed: s.malformed.Load(),
		Orphans: s.orphans.Load(), Foreign: s.foreign.Load(), Evicted: s.evicted.Load(),
	}
}

// UnknownTopics returns how many messages reached a bound endpoint with a topic that
// names no engine.
func (ix *Index) UnknownTopics() uint64 { return ix.unknownTopics.Load() }

// Rejected returns how many ZMQ connections were closed for the reason (see zmtp.Reason).
func (ix *Index) Rejected(reason zmtp.Reason) uint64 { return ix.rejected[reason].Load() }

var (
	descBlocks = prometheus.NewDesc("router_kv_blocks",
		"KV blocks the router's prefix index holds for the engine, over its DP ranks.", []string{"engine"}, nil)
	descGaps = prometheus.NewDesc("router_kv_event_gaps_total",
		"KV-event sequence gaps and publisher restarts seen; without a replay endpoint each drops the rank's blocks.", []string{"engine"}, nil)
	descReplays = prometheus.NewDesc("router_kv_event_replays_total",
		"Replays from the engine's replay endpoint, by result: refilled (a gap), synced (earlier batches on joining), failed.", []string{"engine", "result"}, nil)
	descDiscarded = prometheus.NewDesc("router_kv_events_discarded_total",
		"KV events or blocks the index could not use, by reason: undecodable (messages), unknown_kind (events), malformed (events), orphan, foreign, evicted (blocks).", []string{"engine", "reason"}, nil)
	descUnknownTopic = prometheus.NewDesc("router_kv_event_unknown_topic_total",
		"Messages received on a bound KV-event endpoint whose topic names no configured engine.", nil, nil)
	descRejected = prometheus.NewDesc("router_kv_event_connections_rejected_total",
		"KV-event ZMQ connections closed, by reason: not_allowed (a bind listener's allow-list), too_large, too_many_parts, malformed, handshake_timeout.", []string{"reason"}, nil)
)

// Describe implements prometheus.Collector.
func (ix *Index) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBlocks, descGaps, descReplays, descDiscarded, descUnknownTopic, descRejected} {
		ch <- d
	}
}

// Collect implements prometheus.Collector, so serve can register the index's counters
// with the router's metrics.
func (ix *Index) Collect(ch chan<- prometheus.Metric) {
	c := func(d *prometheus.Desc, t prometheus.ValueType, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, float64(v), labels...)
	}
	for id := range ix.m().engines {
		s := ix.Stats(id)
		c(descBlocks, prometheus.GaugeValue, uint64(ix.Blocks(id)), id)
		c(descGaps, prometheus.CounterValue, s.Gaps, id)
		c(descReplays, prometheus.CounterValue, s.Replays, id, "refilled")
		c(descReplays, prometheus.CounterValue, s.Syncs, id, "synced")
		c(descReplays, prometheus.CounterValue, s.ReplayFailures, id, "failed")
		for _, r := range []struct {
			reason string
			v      uint64
		}{{"undecodable", s.Undecodable}, {"unknown_kind", s.Skipped}, {"malformed", s.Malformed},
			{"orphan", s.Orphans}, {"foreign", s.Foreign}, {"evicted", s.Evicted}} {
			c(descDiscarded, prometheus.CounterValue, r.v, id, r.reason)
		}
	}
	c(descUnknownTopic, prometheus.CounterValue, ix.UnknownTopics())
	for _, r := range zmtp.Reasons {
		c(descRejected, prometheus.CounterValue, ix.Rejected(r), string(r))
	}
}
