package affinity

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// Shared is one namespace of bindings kept in Redis, so that every router replica reuses
// the binding whichever replica admitted it first. Redis does the expiry: a key lives for
// the idle timeout after its last write or touch. Compare-and-bind and touch run as Lua
// scripts, atomic on the server, so concurrent first picks on several replicas converge
// on one engine exactly as concurrent picks do in one router.
//
// Shared keeps a local copy of every binding the store answered, in a Store with the same
// idle timeout. While the store is down it routes with that copy (and binds new keys in
// it), so sessions this replica has seen stay put; when the store is back, a key the store
// lost is re-offered from the copy instead of being placed anew.
type Shared struct {
	remote *Remote
	local  *Store
	ns     string // "s:" for sessions, "k:" for routing keys (sticky)
	idle   time.Duration
}

// NewShared returns the namespace ns ("session" or "sticky") on remote, with the idle
// timeout of local, which holds the local copy.
func NewShared(remote *Remote, local *Store, ns string) *Shared {
	prefix := "k:"
	if ns == "session" {
		prefix = "s:"
	}
	return &Shared{remote: remote, local: local, ns: prefix, idle: local.idle}
}

// key is the Redis key of k: the prefix, the namespace, the model for operators'
// scans, and a hash of every field, so a key's length is bounded whatever the header
// value and no two bindings share a key.
func (s *Shared) key(k Key) string {
	h := sha256.New()
	for _, f := range []string{k.Model, k.Bucket, string(k.Stage), k.Value} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return s.remote.prefix + s.ns + k.Model + ":" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Get implements Bindings.
func (s *Shared) Get(k Key) (string, bool) {
	if !s.remote.Up() {
		s.remote.local.Add(1)
		return s.local.Get(k)
	}
	ctx, cancel := s.remote.ctx()
	defer cancel()
	v, err := s.remote.client.Get(ctx, s.key(k)).Result()
	switch {
	case isMiss(err):
		s.remote.ok()
		return "", false
	case err != nil:
		s.remote.fail(err)
		return s.local.Get(k)
	}
	s.remote.ok()
	s.local.put(k, v)
	return v, true
}

// touchScript refreshes a key's expiry if it still holds the engine.
var touchScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0`)

// Touch implements Bindings.
func (s *Shared) Touch(k Key, engineID string) bool {
	if !s.remote.Up() {
		s.remote.local.Add(1)
		return s.local.Touch(k, engineID)
	}
	ctx, cancel := s.remote.ctx()
	defer cancel()
	n, err := touchScript.Run(ctx, s.remote.client, []string{s.key(k)}, engineID, s.idle.Milliseconds()).Int()
	if err != nil {
		s.remote.fail(err)
		return s.local.Touch(k, engineID)
	}
	s.remote.ok()
	if n == 1 {
		s.local.put(k, engineID)
	}
	return n == 1
}

// bindScript is compare-and-bind: it writes ARGV[2] with the idle expiry if the key holds
// ARGV[1] ("" for no key) and returns the key's engine afterwards and 1 if it wrote.
var bindScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then cur = '' end
if cur ~= ARGV[1] then return {cur, 0} end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {ARGV[2], 1}`)

// CompareAndBind implements Bindings. A first binding (old "") of a key this replica
// still holds locally offers the local engine rather than engineID: the store lost the
// key (it was down or restarted) while the session kept going here, so its engine has the
// session's cache. The policy gets that engine back as another's binding and checks it.
func (s *Shared) CompareAndBind(k Key, old, engineID string) (string, bool) {
	if !s.remote.Up() {
		s.remote.local.Add(1)
		return s.local.CompareAndBind(k, old, engineID)
	}
	offer := engineID
	if old == "" {
		if e, ok := s.local.Get(k); ok {
			offer = e
		}
	}
	ctx, cancel := s.remote.ctx()
	defer cancel()
	res, err := bindScript.Run(ctx, s.remote.client, []string{s.key(k)}, old, offer, s.idle.Milliseconds()).Slice()
	if err == nil && len(res) != 2 {
		err = &BadReply{Reply: res}
	}
	if err != nil {
		s.remote.fail(err)
		return s.local.CompareAndBind(k, old, engineID)
	}
	s.remote.ok()
	cur, _ := res[0].(string)
	wrote, _ := res[1].(int64)
	if cur != "" {
		s.local.put(k, cur)
	}
	return cur, wrote == 1 && cur == engineID
}
