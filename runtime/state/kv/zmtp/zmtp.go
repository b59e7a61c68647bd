// Package zmtp bounds what a ZMQ peer can make the router allocate, and which peers may
// connect at all.
//
// github.com/go-zeromq/zmq4 (v0.17.0, the newest release, with no maintained fork)
// allocates each frame's declared length before reading it, during the handshake too: 73
// bytes, a greeting and one command-frame header declaring a 1 TiB body, end the process
// with "fatal error: runtime: out of memory", which no recover() catches. It also panics
// on a READY command whose metadata ends inside a property (a slice out of range in its
// accept goroutine), accumulates any number of frames into one message, and performs the
// handshake of an accepted connection in its accept loop without a deadline, so one
// silent peer stops every later one.
//
// Rather than replace zmq4 (or link libzmq through cgo for ZMQ_MAXMSGSIZE, which would
// end the static, CGO-free build), this package sits under it as a zmq4 transport: every
// socket the router opens uses the endpoint scheme [Scheme] instead of tcp, and its
// connections are [Conn]s, which parse the ZMTP 3.x framing (the 64-byte greeting, then
// frames of a flags byte and a 1- or 8-byte size) of what the peer sends and hand zmq4
// only whole frames that are within [Limits]. A frame header over a limit closes the
// connection before its body is read, so a declared length is never an allocation: the
// bytes buffered are the bytes received. The handshake has a deadline, and a [Listener]
// closes peers its allow function refuses before reading a byte from them. The switch
// back is the plain tcp:// endpoint, which the tests run beside this one.
package zmtp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// Scheme is the zmq4 transport of bounded TCP connections: write an endpoint as
// Endpoint("tcp://host:port") to use it.
const Scheme = "bounded-tcp"

// Defaults of Limits.
const (
	// DefaultMaxMessageBytes bounds a KV-event message. SGLang and vLLM publish one batch
	// per scheduler step, whose stores hold the tokens prefilled in that step (a chunked
	// prefill of 8-16k tokens by default) at about 6 bytes per token with the block hashes:
	// ~100 KiB. 4 MiB holds an unchunked 700k-token prefill.
	DefaultMaxMessageBytes = 4 << 20
	// DefaultMaxParts bounds the frames of a message: KV events have three (topic,
	// sequence, payload), and so has a replayed batch (delimiter, sequence, payload).
	DefaultMaxParts = 8
	// DefaultHandshakeTimeout bounds the greeting and the READY command of a connection.
	DefaultHandshakeTimeout = 5 * time.Second
	// MaxCommandBytes bounds a command frame (READY with its metadata, PING, ...);
	// libzmq's READY is a few hundred bytes.
	MaxCommandBytes = 64 << 10
)

// Limits bound what one peer may send. Zero fields take the defaults.
type Limits struct {
	// MaxMessageBytes bounds the sum of a message's frames, and so each frame.
	MaxMessageBytes int64
	// MaxParts bounds the frames of a message.
	MaxParts int
	// HandshakeTimeout bounds the time from connecting to the peer's READY command.
	HandshakeTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.MaxParts <= 0 {
		l.MaxParts = DefaultMaxParts
	}
	if l.HandshakeTimeout <= 0 {
		l.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return l
}

// Config is what a socket's connections are held to.
type Config struct {
	Limits
	// Allow reports whether a listener accepts a peer at this address; nil accepts every
	// peer. It is not asked of connections the socket dials.
	Allow func(netip.Addr) bool
	// Reject is told of each connection closed for breaking the limits, refused by Allow
	// or silent through the handshake, with an *Error saying why; nil ignores them.
	Reject func(*Error)
}

type configKey struct{}

// WithConfig returns a context whose zmq4 sockets (zmq4.NewSub(ctx, ...) and the like)
// hold their Scheme connections to cfg. Sockets of a context without one get the default
// limits and accept every peer.
func WithConfig(ctx context.Context, cfg *Config) context.Context {
	return context.WithValue(ctx, configKey{}, cfg)
}

func configOf(ctx context.Context) *Config {
	if cfg, ok := ctx.Value(configKey{}).(*Config); ok && cfg != nil {
		return cfg
	}
	return &Config{}
}

// Endpoint rewrites a tcp:// endpoint to the bounded transport; others are returned as
// they are, for zmq4 to refuse or serve.
func Endpoint(ep string) string {
	if rest, ok := strings.CutPrefix(ep, "tcp://"); ok {
		return Scheme + "://" + rest
	}
	return ep
}

// Reason names why a connection was closed, for logs and metric labels.
type Reason string

// Reasons of an Error.
const (
	NotAllowed       Reason = "not_allowed"       // the listener's Allow refused the peer's address
	TooLarge         Reason = "too_large"         // a frame over MaxMessageBytes or MaxCommandBytes
	TooManyParts     Reason = "too_many_parts"    // a message of more than MaxParts frames
	Malformed        Reason = "malformed"         // not ZMTP 3.x with the NULL mechanism
	HandshakeTimeout Reason = "handshake_timeout" // no READY within HandshakeTimeout
)

// Reasons lists every Reason, for metrics that show each at zero.
var Reasons = []Reason{NotAllowed, TooLarge, TooManyParts, Malformed, HandshakeTimeout}

// Error is why a peer's connection was closed.
type Error struct {
	Reason Reason
	Peer   string // the peer's address
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("zmtp: connection with %s closed: %s", e.Peer, e.Detail)
}

// The transport registered as Scheme.
type boundedTCP struct{ tcp transport.Transport }

func init() {
	if err := zmq4.RegisterTransport(Scheme, boundedTCP{tcp: transport.New("tcp")}); err != nil {
		panic(err)
	}
}

func (t boundedTCP) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.tcp.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return NewConn(c, configOf(ctx)), nil
}

func (t boundedTCP) Listen(ctx context.Context, addr string) (net.Listener, error) {
	l, err := t.tcp.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &Listener{Listener: l, cfg: configOf(ctx)}, nil
}

func (t boundedTCP) Addr(ep string) (string, error) { return t.tcp.Addr(ep) }

// Listener accepts the peers its Config allows, as bounded Conns.
type Listener struct {
	net.Listener
	cfg *Config
}

// Accept returns the next allowed peer's connection; a refused one is closed before a
// byte is read from it, and reported.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.cfg.Allow != nil && !l.cfg.Allow(peerAddr(c)) {
			c.Close()
			l.cfg.report(&Error{Reason: NotAllowed, Peer: c.RemoteAddr().String(),
				Detail: "the address is not among the publishers allowed on this endpoint (kv_events.allow_from)"})
			continue
		}
		return NewConn(c, l.cfg), nil
	}
}

func (cfg *Config) report(err *Error) {
	if cfg.Reject != nil {
		cfg.Reject(err)
	}
}

// peerAddr is the IP address of c's peer, IPv4 as IPv4 even when mapped into IPv6.
func peerAddr(c net.Conn) netip.Addr {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
