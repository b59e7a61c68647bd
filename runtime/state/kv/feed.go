package kv

import (
	"context"
	"log/slog"

	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// feed applies one engine rank's messages in sequence order, whichever socket they come
// from. Publishers number their batches consecutively (SGLang and vLLM from 0, llm-d's
// simulator from 1), so a feed notices lost batches: on a gap it asks the publisher's
// replay endpoint for them when one is configured, and otherwise clears the rank, since a
// stale claim of ownership sends requests to an engine that no longer has the prefix,
// which is worse than no claim.
type feed struct {
	ix        *Index
	info      *engineInfo
	engine    string
	rank      int
	blockSize int
	replay    string // the rank's replay endpoint, "" for none
	log       *slog.Logger
	cfg       *zmtp.Config // the bounds of the sockets it dials: publisher, replay

	started    bool   // a message has been applied since the last reset
	last       uint64 // the sequence number of the last message applied
	warnedSize bool
}

// reset forgets the sequence, for a new connection whose first message starts afresh.
func (f *feed) reset() { f.started = false }

// undecodable handles a message that could not be decoded: its events are lost, so the
// rank's state is unknown from here.
func (f *feed) undecodable(err error) {
	f.info.stats.undecodable.add(1)
	f.log.Warn("kv events: undecodable message; entries of this rank cleared", "err", err)
	f.ix.ClearRank(f.engine, f.rank)
}

// handle applies one decoded message.
func (f *feed) handle(ctx context.Context, m message) {
	st := &f.info.stats
	st.skipped.add(m.skipped)
	switch {
	case !f.started && m.seq > 0 && f.replay != "":
		f.sync(ctx, m.seq)
	case !f.started || m.seq == f.last+1:
	case m.seq == f.last:
		return // a duplicate
	case m.seq > f.last+1 && f.replay != "":
		st.gaps.add(1)
		if f.refill(ctx, f.last+1, m.seq, false) {
			st.replays.add(1)
			f.log.Info("kv events: sequence gap refilled from the replay endpoint", "from", f.last+1, "to", m.seq-1)
			break
		}
		st.replayFailures.add(1)
		f.log.Warn("kv events: sequence gap not refilled; entries of this rank cleared", "from", f.last, "to", m.seq)
		f.ix.ClearRank(f.engine, f.rank)
	default: // a gap without replay, or a restarted publisher counting from the start again
		st.gaps.add(1)
		f.log.Info("kv events: sequence jumped; entries of this rank cleared", "from", f.last, "to", m.seq)
		f.ix.ClearRank(f.engine, f.rank)
	}
	f.apply(m)
	f.started, f.last = true, m.seq
}

// sync learns what the rank stored before this connection: the first message names
// batch seq, so the publisher's replay buffer may still hold batches from 0 on. Whatever
// part of them it still has is applied, since the batches after a buffer's start are a
// complete history of the blocks stored since then; blocks stored before it stay unknown.
// A replay that fails leaves the rank as a late joiner without replay would be.
func (f *feed) sync(ctx context.Context, seq uint64) {
	if f.refill(ctx, 0, seq, true) {
		f.info.stats.syncs.add(1)
		f.log.Info("kv events: rank state replayed on joining", "to", seq-1)
		return
	}
	f.info.stats.replayFailures.add(1)
	f.ix.ClearRank(f.engine, f.rank)
}

// apply applies a message's events without sequence checks.
func (f *feed) apply(m message) {
	f.checkBlockSize(m.events)
	f.ix.Apply(f.engine, f.rank, m.events...)
}

// checkBlockSize warns once when the engine reports pages of another size than the plan
// says: the router's hashes of the prompt would then never match the engine's blocks.
func (f *feed) checkBlockSize(events []Event) {
	if f.warnedSize {
		return
	}
	for _, e := range events {
		if e.Kind == BlockStored && e.BlockSize > 0 && e.BlockSize != f.blockSize {
			f.log.Warn("kv events: engine page size differs from the configured kv_events.block_size; prefix lookups will miss",
				"reported", e.BlockSize, "configured", f.blockSize)
			f.warnedSize = true
			return
		}
	}
}
