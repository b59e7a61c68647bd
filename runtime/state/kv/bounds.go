package kv

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// Every ZMQ socket of the router dials or listens through zmtp's bounded transport (see
// the zmtp package for why): frames and messages over kv_events.max_message_bytes close
// the connection before they are read, and a bind-mode listener closes peers outside its
// allow-list before the handshake.

// resolveTimeout bounds the lookup of the host names of an allow-list.
const resolveTimeout = 5 * time.Second

// loopback is what a loopback engine's publishers may connect from: a local publisher
// dials from whichever loopback address the kernel picks.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// allowList is the addresses a listener accepts publishers from.
type allowList []netip.Prefix

func (a allowList) allows(ip netip.Addr) bool {
	for _, p := range a {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// allowFrom resolves the addresses engine e's publishers may dial a bind endpoint from:
// its kv_events.allow_from, or else the host of its URL, loopback as every loopback
// address. Names that do not resolve are logged and allow nothing.
func allowFrom(e plan.Engine, log *slog.Logger) allowList {
	entries, byDefault := e.KVEvents.AllowFrom, false
	if len(entries) == 0 {
		byDefault = true
		if u, err := url.Parse(e.URL); err == nil && u.Hostname() != "" {
			entries = []string{u.Hostname()}
		}
	}
	var out allowList
	for _, s := range entries {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ips, err := lookup(s)
		if err != nil {
			log.Warn("kv events: an allow_from host does not resolve; its publishers are refused", "engine", e.ID, "host", s, "err", err)
		}
		for _, ip := range ips {
			if byDefault && ip.IsLoopback() {
				out = append(out, loopback...)
				continue
			}
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	if len(out) == 0 {
		log.Warn("kv events: no address may publish this engine's events to the bind endpoint; set kv_events.allow_from", "engine", e.ID)
	}
	return out
}

// lookup resolves an IP address or a host name.
func lookup(host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, err
}

// rejections counts and logs the connections zmtp closes; a flood of them logs at most a
// line a second.
type rejections struct {
	ix   *Index
	log  *slog.Logger
	last atomic.Int64 // unix nanoseconds of the last line
}

func (r *rejections) report(e *zmtp.Error) {
	r.ix.rejected[e.Reason].add(1)
	now, last := time.Now().UnixNano(), r.last.Load()
	if now-last < int64(time.Second) || !r.last.CompareAndSwap(last, now) {
		return
	}
	r.log.Warn("kv events: ZMQ peer disconnected", "peer", e.Peer, "reason", string(e.Reason), "err", e.Detail)
}

// dialConfig is what the sockets a feed dials (its publisher, its replay endpoint) hold
// their peers to.
func dialConfig(kv *plan.KVEvents, rej *rejections) *zmtp.Config {
	return &zmtp.Config{Limits: zmtp.Limits{MaxMessageBytes: kv.MaxMessageBytes}, Reject: rej.report}
}
