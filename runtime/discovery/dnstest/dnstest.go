// Package dnstest is a small authoritative DNS server on a loopback UDP port, for tests of
// DNS discovery: it answers A, AAAA and SRV questions from records a test sets and
// changes, and can be told to fail a name with SERVFAIL or not to answer at all.
package dnstest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// SRV is one SRV record's target and port.
type SRV struct {
	Target string
	Port   uint16
}

// behaviour of a name.
type behaviour int

const (
	answer behaviour = iota
	servfail
	silent
)

type name struct {
	addrs []netip.Addr
	srvs  []SRV
	how   behaviour
}

// Server answers from its records until Close.
type Server struct {
	conn *net.UDPConn
	mu   sync.Mutex
	// names are keyed by lower-case FQDN with the trailing dot.
	names   map[string]*name
	queries int
	done    chan struct{}
}

// Start listens on a free UDP port of 127.0.0.1 and serves until Close.
func Start() (*Server, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("dnstest: listening: %w", err)
	}
	s := &Server{conn: conn, names: map[string]*name{}, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

// Addr is the server's HOST:PORT, for a resolver setting.
func (s *Server) Addr() string { return s.conn.LocalAddr().String() }

// Close stops the server.
func (s *Server) Close() error {
	err := s.conn.Close()
	<-s.done
	return err
}

// Queries counts the questions answered or dropped so far.
func (s *Server) Queries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

func fqdn(n string) string {
	n = strings.ToLower(n)
	if !strings.HasSuffix(n, ".") {
		n += "."
	}
	return n
}

func (s *Server) set(n string, f func(*name)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.names[fqdn(n)]
	if r == nil {
		r = &name{}
		s.names[fqdn(n)] = r
	}
	f(r)
}

// SetAddrs makes n answer these addresses, IPv4 as A and IPv6 as AAAA records; none
// leaves the name existing with no address records.
func (s *Server) SetAddrs(n string, addrs ...string) {
	ips := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		ips[i] = netip.MustParseAddr(a)
	}
	s.set(n, func(r *name) { r.addrs, r.how = ips, answer })
}

// SetSRV makes n answer these SRV records.
func (s *Server) SetSRV(n string, srvs ...SRV) {
	s.set(n, func(r *name) { r.srvs, r.how = srvs, answer })
}

// ServFail makes every question about n fail with SERVFAIL, keeping its records.
func (s *Server) ServFail(n string) { s.set(n, func(r *name) { r.how = servfail }) }

// Silence makes the server drop every question about n, so lookups time out.
func (s *Server) Silence(n string) { s.set(n, func(r *name) { r.how = silent }) }

// Answer makes n answer from its records again after ServFail or Silence.
func (s *Server) Answer(n string) { s.set(n, func(r *name) { r.how = answer }) }

// Delete removes n: questions about it get NXDOMAIN.
func (s *Server) Delete(n string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, fqdn(n))
}

func (s *Server) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if out, ok := s.respond(buf[:n]); ok {
			_, _ = s.conn.WriteToUDPAddrPort(out, from)
		}
	}
}

// respond builds the answer to one query; false means drop it.
func (s *Server) respond(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	r, known := s.names[strings.ToLower(q.Name.String())]
	switch {
	case known && r.how == silent:
		return nil, false
	case known && r.how == servfail:
		rh.RCode = dnsmessage.RCodeServerFailure
	case !known:
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	if known && r.how == answer {
		rrh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}
		switch q.Type {
		case dnsmessage.TypeA:
			for _, a := range r.addrs {
				if a.Is4() {
					_ = b.AResource(rrh, dnsmessage.AResource{A: a.As4()})
				}
			}
		case dnsmessage.TypeAAAA:
			for _, a := range r.addrs {
				if a.Is6() {
					_ = b.AAAAResource(rrh, dnsmessage.AAAAResource{AAAA: a.As16()})
				}
			}
		case dnsmessage.TypeSRV:
			for _, srv := range r.srvs {
				target, err := dnsmessage.NewName(fqdn(srv.Target))
				if err != nil {
					continue
				}
				_ = b.SRVResource(rrh, dnsmessage.SRVResource{Priority: 10, Weight: 10, Port: srv.Port, Target: target})
			}
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
