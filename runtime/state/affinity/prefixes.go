package affinity

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Prefixes is the approximate prefix index's shared claims (prefix.Store) in the binding
// store: one Redis hash per checkpoint, <key_prefix>p:<checkpoint in hex>, whose fields
// are the engines that claimed it and whose values are when, in Unix milliseconds. A
// claim refreshes its field and the key's expiry, so a key lives ttl after its last claim
// and a field older than ttl is ignored, as the local index forgets an entry ttl after
// its last use. A key holds at most one field per engine of the fleet.
//
// It follows the binding store's health: while the store is down (Remote.Up), claims are
// dropped and lookups answer "no answer" at once, so every replica routes with its own
// index; a failed operation marks the store down for bindings too.
type Prefixes struct {
	remote *Remote
	ttl    time.Duration
}

// NewPrefixes returns the shared claims on remote, each living ttl after its last claim.
func NewPrefixes(remote *Remote, ttl time.Duration) *Prefixes {
	return &Prefixes{remote: remote, ttl: ttl}
}

func (p *Prefixes) key(checkpoint int64) string {
	return p.remote.prefix + "p:" + strconv.FormatUint(uint64(checkpoint), 16)
}

// Claim implements prefix.Store: one pipelined round trip of HSET and PEXPIRE per
// checkpoint.
func (p *Prefixes) Claim(engineID string, checkpoints []int64) {
	p.write(checkpoints, func(ctx context.Context, pipe redis.Pipeliner, key string, now int64) {
		pipe.HSet(ctx, key, engineID, now)
		pipe.PExpire(ctx, key, p.ttl)
	})
}

// Unclaim implements prefix.Store.
func (p *Prefixes) Unclaim(engineID string, checkpoints []int64) {
	p.write(checkpoints, func(ctx context.Context, pipe redis.Pipeliner, key string, _ int64) {
		pipe.HDel(ctx, key, engineID)
	})
}

func (p *Prefixes) write(checkpoints []int64, op func(context.Context, redis.Pipeliner, string, int64)) {
	if !p.remote.Up() {
		p.remote.local.Add(1)
		return
	}
	ctx, cancel := p.remote.ctx()
	defer cancel()
	now := p.remote.clock().UnixMilli()
	pipe := p.remote.client.Pipeline()
	for _, cp := range checkpoints {
		op(ctx, pipe, p.key(cp), now)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		p.remote.fail(err)
	}
}

// Holders implements prefix.Store: one pipelined round trip of HGETALL per checkpoint.
func (p *Prefixes) Holders(checkpoints []int64) ([][]string, bool) {
	if !p.remote.Up() {
		p.remote.local.Add(1)
		return nil, false
	}
	ctx, cancel := p.remote.ctx()
	defer cancel()
	pipe := p.remote.client.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(checkpoints))
	for i, cp := range checkpoints {
		cmds[i] = pipe.HGetAll(ctx, p.key(cp))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		p.remote.fail(err)
		return nil, false
	}
	oldest := p.remote.clock().Add(-p.ttl).UnixMilli()
	out := make([][]string, len(checkpoints))
	for i, c := range cmds {
		for engine, at := range c.Val() {
			if ms, err := strconv.ParseInt(at, 10, 64); err == nil && ms > oldest {
				out[i] = append(out[i], engine)
			}
		}
	}
	return out, true
}
