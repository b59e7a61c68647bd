package zmtp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/runtime/rawtcp"
)

// Sub is a SUB socket over one dialled connection, read in its caller's goroutine.
//
// A zmq4 socket reads each connection in a goroutine of its own and hands every message
// to the goroutine that calls Recv through a channel: two goroutines woken per message,
// which at a few hundred KV-event batches a second was a quarter of what the events
// cost the router. A Sub reads the Conn's checked frames where Recv is called, so only
// the subscriber wakes. It speaks ZMTP 3.0 as zmq4 does (a subscription is a message
// whose first byte is 1), which libzmq's PUB and XPUB sockets and zmq4's accept, answers
// PING with PONG, and holds the peer to the Conn's limits.
type Sub struct {
	c         *Conn
	topic     []byte // the prefix of the first frames Recv returns
	ready     bool   // the peer's READY command has been checked
	stop      func() bool
	msg       []byte            // the frames of the message Recv returned, end to end
	ends      []int             // where each of them ends in msg
	frames    [][]byte          // Recv's result, into msg
	handshake [greetingLen]byte // what DialSub sends
}

// DialSub connects to a PUB socket at endpoint ("tcp://host:port") within timeout,
// subscribes to the messages whose first frame begins with topic, and holds the peer
// to cfg. The connection closes when ctx is done or Close is called.
func DialSub(ctx context.Context, endpoint string, cfg *Config, topic string, timeout time.Duration) (*Sub, error) {
	addr, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return nil, fmt.Errorf("zmtp: endpoint %q: only tcp:// is supported", endpoint)
	}
	nc, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("zmtp: dialing %s: %w", endpoint, err)
	}
	nc = rawtcp.Wrap(nc) // a batch's first read after an idle spell does not wake sysmon
	s := &Sub{c: NewConn(nc, cfg), topic: []byte(topic)}
	s.stop = context.AfterFunc(ctx, func() { nc.Close() })
	// READY and the subscription follow the peer's greeting: libzmq closes a connection
	// whose READY arrives with the greeting, before it has sent its own.
	_, err = nc.Write(appendGreeting(s.handshake[:0]))
	if err == nil {
		err = s.c.wait()
	}
	if err == nil {
		_, err = nc.Write(appendFrame(appendReady(s.handshake[:0], "SUB"), 0, append([]byte{1}, topic...)))
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("zmtp: handshake with %s: %w", endpoint, err)
	}
	return s, nil
}

// Close closes the connection.
func (s *Sub) Close() error {
	s.stop()
	return s.c.Close()
}

// Recv returns the frames of the next message of the subscribed topic, which stay valid
// until the next Recv. Its error, once the connection has ended, is a *ConnError.
func (s *Sub) Recv() ([][]byte, error) {
	if cap(s.msg) > 4*readChunk {
		s.msg = nil // the last large message is handled: give its memory back, as the Conn does
	}
	s.msg, s.ends = s.msg[:0], s.ends[:0]
	for {
		flags, body, err := s.c.next()
		if err != nil {
			return nil, err
		}
		if flags&flagCommand != 0 {
			if err := s.command(body); err != nil {
				return nil, err
			}
			continue
		}
		// The Conn's buffer moves when it reads more, so a message's frames are kept here.
		s.msg = append(s.msg, body...)
		s.ends = append(s.ends, len(s.msg))
		if flags&flagMore != 0 {
			continue
		}
		// A PUB socket filters for its subscribers; an XPUB one may send everything.
		if !bytes.HasPrefix(s.msg[:s.ends[0]], s.topic) {
			s.msg, s.ends = s.msg[:0], s.ends[:0]
			continue
		}
		s.frames = s.frames[:0]
		start := 0
		for _, end := range s.ends {
			s.frames = append(s.frames, s.msg[start:end:end])
			start = end
		}
		return s.frames, nil
	}
}

// command handles a command the Conn accepted: the peer's READY must name a socket
// that publishes, and a PING is answered.
func (s *Sub) command(body []byte) error {
	name, props := string(body[1:1+body[0]]), body[1+body[0]:]
	switch {
	case name == "READY" && !s.ready:
		md := zmq4.Metadata{}
		if err := md.UnmarshalZMTP(props); err != nil {
			return s.c.abort(Malformed, fmt.Sprintf("READY metadata: %v", err))
		}
		if t := zmq4.SocketType(md["Socket-Type"]); t != zmq4.Pub && t != zmq4.XPub {
			return s.c.abort(Malformed, fmt.Sprintf("a SUB socket's peer is a %s socket, not PUB or XPUB", t))
		}
		s.ready = true
	case name == "PING" && len(props) >= 2:
		// PING has a 2-byte TTL and up to 16 bytes of context, which PONG echoes.
		ctx := props[2:min(len(props), 18)]
		pong := appendFrame(nil, flagCommand, append([]byte{4, 'P', 'O', 'N', 'G'}, ctx...))
		if _, err := s.c.Write(pong); err != nil {
			return s.c.lose(fmt.Errorf("answering PING: %w", err))
		}
	}
	return nil
}

// appendGreeting appends a ZMTP 3.0 greeting of the NULL mechanism, as a client.
func appendGreeting(b []byte) []byte {
	var g [greetingLen]byte
	g[0], g[9], g[10], g[11] = 0xff, 0x7f, 3, 0
	copy(g[12:], "NULL")
	return append(b, g[:]...)
}

// appendReady appends a READY command naming the socket type.
func appendReady(b []byte, sockType string) []byte {
	body := append([]byte{5}, "READY"...)
	body = append(body, 11)
	body = append(body, "Socket-Type"...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(sockType)))
	return appendFrame(b, flagCommand, append(body, sockType...))
}

// appendFrame appends a frame, short or long as its size needs.
func appendFrame(b []byte, flags byte, body []byte) []byte {
	if len(body) > 255 {
		b = binary.BigEndian.AppendUint64(append(b, flags|flagLong), uint64(len(body)))
	} else {
		b = append(b, flags, byte(len(body)))
	}
	return append(b, body...)
}
