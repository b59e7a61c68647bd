package sim

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// roomTTL is how long the outcome of a prefill is kept for a decode that has not asked
// for it yet; a router that sends only the prefill half leaves such entries behind.
const roomTTL = time.Minute

// bootstrapAddr is the key of a bootstrap address. Every simulated engine listens on the
// loopback interface, so loopback names (localhost, 127.0.0.1, ::1) are one host: a router
// configured with http://localhost:... injects "localhost" and must still match.
func bootstrapAddr(host string, port int) string {
	if isLoopback(host) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// roomKey names a bootstrap room on one prefill engine's bootstrap address.
type roomKey struct {
	addr string // bootstrap_host:bootstrap_port
	room uint64
}

// room is the KV hand-over of one disaggregated request: closed done means the prefill
// finished, with err set when it failed.
type room struct {
	done    chan struct{}
	err     error
	created time.Time
}

// rooms connects the prefill and decode engines of one fleet, standing in for SGLang's
// bootstrap server and KV transfer: a decode request waits for the prefill of its room
// when that prefill runs in this process.
type rooms struct {
	// local holds the bootstrap addresses of the fleet's prefill engines. It is written
	// before any engine serves and only read afterwards.
	local map[string]bool

	mu    sync.Mutex
	byKey map[roomKey]*room
	order []roomKey // creation order, for expiry
}

func newRooms() *rooms {
	return &rooms{local: make(map[string]bool), byKey: make(map[roomKey]*room)}
}

// isLocal reports whether a prefill engine of this fleet owns the bootstrap address.
func (rs *rooms) isLocal(addr string) bool { return rs.local[addr] }

// get returns the room for key, creating it, and drops rooms older than roomTTL.
func (rs *rooms) get(key roomKey) *room {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := time.Now()
	for len(rs.order) > 0 {
		old, ok := rs.byKey[rs.order[0]]
		if ok && now.Sub(old.created) < roomTTL {
			break
		}
		if ok {
			delete(rs.byKey, rs.order[0])
		}
		rs.order = rs.order[1:]
	}
	r, ok := rs.byKey[key]
	if !ok {
		r = &room{done: make(chan struct{}), created: now}
		rs.byKey[key] = r
		rs.order = append(rs.order, key)
	}
	return r
}

// finish records the outcome of the prefill for key. Only the first outcome counts.
func (rs *rooms) finish(key roomKey, err error) {
	r := rs.get(key)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	select {
	case <-r.done:
	default:
		r.err = err
		close(r.done)
	}
}

// wait blocks until the prefill for key has finished, at most timeout, and consumes the
// room. It returns the prefill's error, a timeout error, or ctx's error.
func (rs *rooms) wait(ctx context.Context, key roomKey, timeout time.Duration) error {
	r := rs.get(key)
	defer func() {
		rs.mu.Lock()
		delete(rs.byKey, key)
		rs.mu.Unlock()
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.done:
		return r.err
	case <-t.C:
		return fmt.Errorf("no prefill for bootstrap room %d at %s within %v", key.room, key.addr, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// consume takes a finished room without waiting: the error of a prefill that failed, or
// one for a room nobody prefilled (or that was already consumed). vLLM's protocol runs
// the decode after the prefill answered, so there is nothing to wait for.
func (rs *rooms) consume(key roomKey) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.byKey[key]
	if !ok {
		return fmt.Errorf("no prefill of this request is waiting to be transferred")
	}
	select {
	case <-r.done:
	default:
		return fmt.Errorf("the prefill of this request has not finished")
	}
	delete(rs.byKey, key)
	return r.err
}
