// Package discovery keeps the engines a DNS name lists in the router's fleet: the
// Kubernetes headless-service pattern, where a Service without a cluster IP answers with
// one A/AAAA record per ready pod (or one SRV record per pod, with its port). Each
// engines_from_dns source is resolved on a jittered interval and diffed against the set
// it last applied; engines that appear are added, engines that go are drained, then
// removed once they had the drain period to finish their requests.
//
// A failed lookup (SERVFAIL, timeout, refused) keeps the last set: a DNS outage must not
// empty a fleet that is serving. An answer that the name does not exist, or has no
// records, is believed only after EmptyGrace consecutive such answers, since a name
// briefly missing during a rollout is common and an emptied fleet is an outage.
package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/routerkit/router/runtime/plan"
)

// Membership is the fleet a source changes. Add puts an engine in service; Drain takes
// it out of every candidate set while its in-flight requests finish; Remove forgets it.
// An error leaves the engine as it was, and the source tries again on its next round.
type Membership interface {
	Add(e plan.Engine) error
	Drain(id string) error
	Remove(id string) error
}

// Clock is the time a source runs on; tests inject one they advance by hand.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options are the parts of a Discovery that are not configuration.
type Options struct {
	// DrainFor is how long a departed engine drains (no new picks) before it is
	// removed; removal waits for at least the next round whatever it is, so an engine
	// is seen draining for one interval at least. Zero removes it at the next round.
	DrainFor time.Duration
	// Clock defaults to the wall clock.
	Clock Clock
	// Jitter returns a number in [0,1) that spreads each interval by up to a tenth
	// either way, so routers restarted together do not query in step. Default: random.
	Jitter func() float64
	Logger *slog.Logger
	// Resolve replaces the DNS lookups of a source; nil uses net.Resolver.
	Resolve func(ctx context.Context, s plan.DNSSource) (Answer, error)
}

// Answer is what one resolution of a source found.
type Answer struct {
	// Addrs are the engines' addresses, sorted and without duplicates.
	Addrs []netip.AddrPort
}

// Errors a resolution reports. A lookup that failed keeps the last set; an empty
// answer counts towards the source's grace.
var (
	ErrEmpty  = errors.New("the name does not exist or has no records")
	ErrLookup = errors.New("lookup failed")
	// ErrUnknownEngine, from a Membership's Drain or Remove, says the engine is no
	// member any more (an admin removed it, a reload dropped it): the source forgets it.
	ErrUnknownEngine = errors.New("no such engine")
)

// Discovery runs every source of a plan against one membership.
type Discovery struct {
	sources []*source
	m       Membership
	opts    Options
}

// New prepares the sources; Run starts them.
func New(srcs []plan.DNSSource, m Membership, opts Options) *Discovery {
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Resolve == nil {
		opts.Resolve = resolve
	}
	d := &Discovery{m: m, opts: opts}
	for _, s := range srcs {
		d.sources = append(d.sources, &source{cfg: s, members: map[string]*member{},
			log: opts.Logger.With("dns_source", s.ID)})
	}
	return d
}

// Start resolves every source once, so the engines they find serve from the first
// request, then keeps resolving them in the background until ctx ends. The returned
// function waits for the background work to stop.
func (d *Discovery) Start(ctx context.Context) (wait func()) {
	var first sync.WaitGroup
	for _, s := range d.sources {
		first.Go(func() { d.step(ctx, s) })
	}
	first.Wait()
	var loops sync.WaitGroup
	for _, s := range d.sources {
		loops.Go(func() { d.loop(ctx, s) })
	}
	return loops.Wait
}

func (d *Discovery) loop(ctx context.Context, s *source) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.opts.Clock.After(d.interval(s)):
		}
		d.step(ctx, s)
	}
}

// interval is the source's interval spread by up to a tenth either way.
func (d *Discovery) interval(s *source) time.Duration {
	base := time.Duration(s.cfg.IntervalSecs) * time.Second
	return base + time.Duration((d.opts.Jitter()-0.5)*0.2*float64(base))
}

// Step resolves every source once and applies the changes, in order; tests drive
// discovery with it instead of Start.
func (d *Discovery) Step(ctx context.Context) {
	for _, s := range d.sources {
		d.step(ctx, s)
	}
}

// Adopt takes over an engine an earlier Discovery added, as when a reload restarts
// discovery: the source whose template makes exactly this engine at its address tracks
// it as its own. False means no source would make it, and the caller removes it.
// Call before Start.
func (d *Discovery) Adopt(e plan.Engine) bool {
	_, host, ok := strings.Cut(e.URL, "://")
	if !ok {
		return false
	}
	a, err := netip.ParseAddrPort(host)
	if err != nil {
		return false
	}
	for _, s := range d.sources {
		if EngineID(s.cfg.ID, a) == e.ID && reflect.DeepEqual(Engine(s.cfg, a), e) {
			s.members[e.ID] = &member{engine: e}
			s.status.Engines = append(s.status.Engines, e.ID)
			return true
		}
	}
	return false
}

type member struct {
	engine plan.Engine
	// drainingSince is when the name stopped listing the engine; zero while it serves.
	drainingSince time.Time
	// drainRound is the round that drained it; removal waits for a later one.
	drainRound int
}

type source struct {
	cfg plan.DNSSource
	log *slog.Logger
	// mu guards members and status against Status readers; one goroutine steps a source.
	mu      sync.Mutex
	members map[string]*member
	empties int
	// round counts resolutions.
	round  int
	status Status
}

// step runs one resolution of s and applies what changed.
func (d *Discovery) step(ctx context.Context, s *source) {
	lctx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.TimeoutMS)*time.Millisecond)
	ans, err := d.opts.Resolve(lctx, s.cfg)
	cancel()
	if ctx.Err() != nil {
		return // shutting down: a cancelled lookup says nothing about the name
	}
	now := d.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.round++
	s.status.LastLookup = now
	switch {
	case errors.Is(err, ErrEmpty):
		s.status.Lookups.Empty++
		s.empties++
		if s.empties <= s.cfg.EmptyGrace {
			s.status.LastError = fmt.Sprintf("%v (%d of %d answers before its engines are drained)", err, s.empties, s.cfg.EmptyGrace)
			s.log.Warn("dns source found no engines; keeping the last set", "err", err, "empty_answers", s.empties, "grace", s.cfg.EmptyGrace)
			d.removeDrained(s, now)
			return
		}
		s.status.LastError = err.Error()
		ans = Answer{}
	case err != nil:
		s.status.Lookups.Failed++
		s.status.Failures++
		s.status.LastError = err.Error()
		s.log.Warn("dns lookup failed; keeping the last set", "err", err, "consecutive_failures", s.status.Failures)
		d.removeDrained(s, now)
		return
	default:
		s.status.Lookups.OK++
		s.status.LastError = ""
		s.empties = 0
	}
	s.status.Failures = 0
	s.status.LastSuccess = now
	d.apply(s, d.bound(s, ans.Addrs), now)
}

// bound keeps at most MaxEngines addresses: the ones already serving first, so that an
// overfull answer does not churn the fleet, then the rest in address order.
func (d *Discovery) bound(s *source, addrs []netip.AddrPort) []netip.AddrPort {
	s.status.LeftOut = 0
	if len(addrs) <= s.cfg.MaxEngines {
		return addrs
	}
	var serving, rest []netip.AddrPort
	for _, a := range addrs {
		if m := s.members[EngineID(s.cfg.ID, a)]; m != nil && m.drainingSince.IsZero() {
			serving = append(serving, a)
		} else {
			rest = append(rest, a)
		}
	}
	kept := append(serving, rest...)[:s.cfg.MaxEngines]
	s.status.LeftOut = len(addrs) - len(kept)
	s.status.LastError = fmt.Sprintf("%d addresses, more than max_engines (%d): %d left out; raise max_engines to use them", len(addrs), s.cfg.MaxEngines, s.status.LeftOut)
	s.log.Error("dns source lists more engines than max_engines; the rest are left out", "addresses", len(addrs), "max_engines", s.cfg.MaxEngines, "left_out", s.status.LeftOut)
	return kept
}

// apply drains members the answer no longer lists, removes those drained long enough,
// and adds new ones. Removal comes before adding, so an engine that left and came back
// after its drain period is removed and added again fresh in one round.
func (d *Discovery) apply(s *source, addrs []netip.AddrPort, now time.Time) {
	want := make(map[string]netip.AddrPort, len(addrs))
	for _, a := range addrs {
		want[EngineID(s.cfg.ID, a)] = a
	}
	for _, id := range sortedKeys(s.members) {
		m := s.members[id]
		if _, ok := want[id]; ok || !m.drainingSince.IsZero() {
			continue
		}
		if err := d.m.Drain(id); err != nil {
			if errors.Is(err, ErrUnknownEngine) {
				delete(s.members, id) // gone already, by an admin or a reload
				continue
			}
			s.log.Error("draining an engine the name no longer lists", "engine", id, "err", err)
			continue
		}
		m.drainingSince, m.drainRound = now, s.round
		s.log.Info("engine left the dns answer; draining", "engine", id, "remove_after", d.opts.DrainFor)
	}
	d.removeDrained(s, now)
	for _, id := range sortedKeys(want) {
		if _, ok := s.members[id]; ok {
			continue
		}
		e := Engine(s.cfg, want[id])
		if err := d.m.Add(e); err != nil {
			s.status.AddFailures++
			s.log.Error("adding an engine the name lists", "engine", id, "url", plan.RedactURL(e.URL), "err", err)
			continue
		}
		s.members[id] = &member{engine: e}
		s.log.Info("engine found in dns; added", "engine", id, "url", plan.RedactURL(e.URL))
	}
	s.status.Engines = s.status.Engines[:0]
	s.status.Draining = s.status.Draining[:0]
	for _, id := range sortedKeys(s.members) {
		if s.members[id].drainingSince.IsZero() {
			s.status.Engines = append(s.status.Engines, id)
		} else {
			s.status.Draining = append(s.status.Draining, id)
		}
	}
}

// removeDrained removes members that drained for DrainFor.
func (d *Discovery) removeDrained(s *source, now time.Time) {
	for _, id := range sortedKeys(s.members) {
		m := s.members[id]
		if m.drainingSince.IsZero() || m.drainRound == s.round || now.Sub(m.drainingSince) < d.opts.DrainFor {
			continue
		}
		if err := d.m.Remove(id); err != nil && !errors.Is(err, ErrUnknownEngine) {
			s.log.Error("removing a drained engine", "engine", id, "err", err)
			continue
		}
		delete(s.members, id)
		s.status.Draining = slices.DeleteFunc(s.status.Draining, func(x string) bool { return x == id })
		s.log.Info("drained engine removed", "engine", id)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// EngineID names the engine at a of source id: ID:IP:PORT, with an IPv6 address
// unbracketed. It is stable for as long as the address serves, readable in logs and
// metrics, and uses only the characters engine ids allow.
func EngineID(source string, a netip.AddrPort) string {
	return source + ":" + a.Addr().String() + ":" + strconv.Itoa(int(a.Port()))
}

// Engine is the source's template placed at a: its id, its URL and {host} in its
// KV-event settings filled in.
func Engine(s plan.DNSSource, a netip.AddrPort) plan.Engine {
	e := s.Engine
	e.ID = EngineID(s.ID, a)
	e.URL = s.Scheme + "://" + a.String()
	if kv := e.KVEvents; kv != nil {
		c := *kv
		host := a.Addr().String()
		if a.Addr().Is6() {
			host = "[" + host + "]"
		}
		c.Endpoint = strings.ReplaceAll(c.Endpoint, plan.HostPlaceholder, host)
		c.ReplayEndpoint = strings.ReplaceAll(c.ReplayEndpoint, plan.HostPlaceholder, host)
		c.Topic = strings.ReplaceAll(c.Topic, plan.HostPlaceholder, a.Addr().String())
		e.KVEvents = &c
	}
	return e
}

// Status is what a source last did, for /admin/state and metrics.
type Status struct {
	ID string `json:"id"`
	// Name is the DNS name asked, with the record type: "A/AAAA NAME" or "SRV NAME".
	Name        string    `json:"name"`
	Engines     []string  `json:"engines"`
	Draining    []string  `json:"draining"`
	LastLookup  time.Time `json:"last_lookup"`
	LastSuccess time.Time `json:"last_success"`
	// LastError is why the last lookup failed, or what it had to leave out; empty when
	// it was applied whole.
	LastError string `json:"last_error,omitempty"`
	// Failures counts consecutive failed lookups.
	Failures int `json:"consecutive_failures"`
	// LeftOut counts the addresses over max_engines in the last answer.
	LeftOut     int     `json:"left_out"`
	AddFailures int     `json:"add_failures"`
	Lookups     Lookups `json:"lookups"`
}

// Lookups counts resolutions by outcome.
type Lookups struct {
	OK     int64 `json:"ok"`
	Empty  int64 `json:"empty"`
	Failed int64 `json:"failed"`
}

// Status reports every source, in configuration order.
func (d *Discovery) Status() []Status {
	out := make([]Status, len(d.sources))
	for i, s := range d.sources {
		s.mu.Lock()
		st := s.status
		st.Engines = slices.Clone(st.Engines)
		st.Draining = slices.Clone(st.Draining)
		s.mu.Unlock()
		st.ID = s.cfg.ID
		if s.cfg.SRV != "" {
			st.Name = "SRV " + s.cfg.SRV
		} else {
			st.Name = "A/AAAA " + s.cfg.Name + ":" + strconv.Itoa(s.cfg.Port)
		}
		if st.Engines == nil {
			st.Engines = []string{}
		}
		if st.Draining == nil {
			st.Draining = []string{}
		}
		out[i] = st
	}
	return out
}

// resolve asks DNS for s's engines through the source's resolver.
func resolve(ctx context.Context, s plan.DNSSource) (Answer, error) {
	r := Resolver(s.Resolver)
	var addrs []netip.AddrPort
	if s.SRV != "" {
		_, srvs, err := r.LookupSRV(ctx, "", "", s.SRV)
		if err != nil {
			return Answer{}, classify("SRV "+s.SRV, err)
		}
		// Targets are resolved here, through the same resolver, so every engine is an
		// address: the HTTP client would otherwise resolve them with the system's. They
		// are taken in name order (the resolver shuffles by weight) and at most twice
		// max_engines of them, which bounds the lookups of a round.
		slices.SortFunc(srvs, func(a, b *net.SRV) int {
			return cmp.Or(strings.Compare(a.Target, b.Target), cmp.Compare(a.Port, b.Port))
		})
		if limit := 2 * s.MaxEngines; len(srvs) > limit {
			srvs = srvs[:limit]
		}
		for _, srv := range srvs {
			ips, err := lookupAddrs(ctx, r, srv.Target)
			if err != nil && !errors.Is(err, ErrEmpty) {
				return Answer{}, err
			}
			for _, ip := range ips {
				addrs = append(addrs, netip.AddrPortFrom(ip, srv.Port))
			}
		}
	} else {
		ips, err := lookupAddrs(ctx, r, s.Name)
		if err != nil {
			return Answer{}, err
		}
		for _, ip := range ips {
			addrs = append(addrs, netip.AddrPortFrom(ip, uint16(s.Port)))
		}
	}
	if len(addrs) == 0 {
		return Answer{}, ErrEmpty
	}
	slices.SortFunc(addrs, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return Answer{Addrs: slices.Compact(addrs)}, nil
}

// lookupAddrs asks for A and AAAA records separately: a combined lookup returns what one
// family found when the other failed, and a failure must keep the set, not shrink it.
func lookupAddrs(ctx context.Context, r *net.Resolver, name string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, family := range []string{"ip4", "ip6"} {
		ips, err := r.LookupNetIP(ctx, family, name)
		if err != nil {
			if err := classify(name, err); !errors.Is(err, ErrEmpty) {
				return nil, err
			}
			continue
		}
		for _, ip := range ips {
			out = append(out, ip.Unmap())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("A/AAAA %s: %w", name, ErrEmpty)
	}
	return out, nil
}

// classify wraps a resolver error as ErrEmpty (NXDOMAIN, no records) or ErrLookup.
func classify(what string, err error) error {
	var de *net.DNSError
	if errors.As(err, &de) && de.IsNotFound {
		return fmt.Errorf("%s: %w", what, ErrEmpty)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrLookup, err)
}

// Resolver is a pure-Go resolver that asks addr (HOST:PORT) for every query, or the
// system's configured servers when addr is empty.
func Resolver(addr string) *net.Resolver {
	if addr == "" {
		return &net.Resolver{PreferGo: true}
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}
