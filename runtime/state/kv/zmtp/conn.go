package zmtp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/go-zeromq/zmq4"
)

// ZMTP 3.x framing (rfc.zeromq.org/spec/23).
const (
	greetingLen = 64
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
	flagsKnown  = flagMore | flagLong | flagCommand
)

// readChunk is the least free space a Conn reads into: what it buffers beyond the whole
// frames it holds.
const readChunk = 32 << 10

// Conn is a connection whose peer's bytes reach the reader (zmq4) only as a valid ZMTP
// 3.x greeting and whole frames within the Config's limits. A frame is buffered until its
// last byte has arrived, so the reader's allocation of the declared size never exceeds
// what was received, and a header over a limit closes the connection at once. Writes pass
// through.
type Conn struct {
	net.Conn
	cfg *Config
	lim Limits
	s   scanner

	// buf[r:a] is accepted and not yet read, buf[a:w] received and not yet whole.
	buf     []byte
	r, a, w int
	err     error      // sticky: the error after the accepted bytes
	ended   *ConnError // err with what the connection carried, built once
	ready   bool       // the handshake deadline has been lifted
	greeted bool       // next has skipped the greeting
}

// NewConn bounds c by cfg and starts the handshake deadline.
func NewConn(c net.Conn, cfg *Config) *Conn {
	lim := cfg.Limits.withDefaults()
	_ = c.SetDeadline(time.Now().Add(lim.HandshakeTimeout))
	return &Conn{Conn: c, cfg: cfg, lim: lim, s: scanner{lim: lim}}
}

// Read hands over accepted bytes, reading and checking more from the peer when it has
// none.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.wait(); err != nil {
		return 0, err
	}
	n := copy(p, c.buf[c.r:c.a])
	c.r += n
	return n, nil
}

// wait reads from the peer until there are accepted bytes to hand over, or returns the
// connection's end as a *ConnError.
func (c *Conn) wait() error {
	for c.r == c.a {
		if c.err != nil {
			if c.ended == nil {
				c.ended = &ConnError{Peer: c.RemoteAddr().String(), Topics: c.s.topics, AllTopics: c.s.tooManyTopics, Err: c.err}
			}
			return c.ended
		}
		c.fill()
	}
	return nil
}

// next returns the next accepted frame, its flags and its body, which stays valid until
// the Conn reads again; the greeting before the first is skipped. It is Read for a
// reader of whole frames (Sub), and the two are not mixed on one Conn: the accepted bytes
// are the whole greeting and whole frames, so next finds a frame's header at c.r.
func (c *Conn) next() (byte, []byte, error) {
	if err := c.wait(); err != nil {
		return 0, nil, err
	}
	if !c.greeted {
		c.r += greetingLen
		c.greeted = true
		if err := c.wait(); err != nil {
			return 0, nil, err
		}
	}
	b := c.buf[c.r:c.a]
	flags, hdr, size := b[0], 2, int(b[1])
	if flags&flagLong != 0 {
		hdr, size = 9, int(binary.BigEndian.Uint64(b[1:9]))
	}
	c.r += hdr + size
	return flags, b[hdr : hdr+size], nil
}

// abort closes the connection for a violation found after its bytes were accepted, and
// returns its end.
func (c *Conn) abort(reason Reason, detail string) error {
	c.fail(reason, detail)
	return c.end()
}

// lose closes the connection after err, which is not the peer's violation (a failed
// write), and returns its end.
func (c *Conn) lose(err error) error {
	if c.err == nil {
		c.err = err
	}
	c.Conn.Close()
	return c.end()
}

// end drops the accepted bytes not yet read and returns the connection's end.
func (c *Conn) end() error {
	c.r = c.a
	return c.wait()
}

// fill reads once from the peer and accepts what completes; on a violation it closes the
// connection and sets c.err.
func (c *Conn) fill() {
	c.makeRoom()
	n, err := c.Conn.Read(c.buf[c.w:cap(c.buf)])
	c.buf = c.buf[:cap(c.buf)]
	c.w += n
	k, verr := c.s.scan(c.buf[c.a:c.w])
	c.a += k
	if c.s.ready && !c.ready {
		c.ready = true
		_ = c.Conn.SetDeadline(time.Time{})
	}
	switch {
	case verr != nil:
		c.fail(verr.Reason, verr.Detail)
	case errors.Is(err, os.ErrDeadlineExceeded) && !c.ready:
		c.fail(HandshakeTimeout, fmt.Sprintf("no ZMTP handshake within %s", c.lim.HandshakeTimeout))
	case err != nil:
		c.err = err
	}
}

// makeRoom leaves at least readChunk free bytes after buf[w]: it drops what was read,
// keeping the rest at the start, and grows the buffer only for a frame longer than it.
func (c *Conn) makeRoom() {
	if c.r == c.w {
		c.r, c.a, c.w = 0, 0, 0
		if cap(c.buf) > 4*readChunk {
			c.buf = nil // the last large frame is read: give its memory back
		}
	}
	if c.r > 0 {
		copy(c.buf, c.buf[c.r:c.w])
		c.a -= c.r
		c.w -= c.r
		c.r = 0
	}
	if cap(c.buf)-c.w < readChunk {
		b := make([]byte, c.w, max(2*cap(c.buf), c.w+readChunk))
		copy(b, c.buf[:c.w])
		c.buf = b
	}
}

func (c *Conn) fail(reason Reason, detail string) {
	e := &Error{Reason: reason, Peer: c.RemoteAddr().String(), Detail: detail}
	c.err = e
	c.Conn.Close()
	c.cfg.report(e)
}

// scanner checks a peer's byte stream: the greeting, the handshake command, then frames.
// It sees the stream from a frame boundary on each time, and keeps only the progress of
// the message in progress.
type scanner struct {
	lim     Limits
	greeted bool  // the greeting is accepted
	ready   bool  // the peer's READY command is accepted
	parts   int   // frames of the message in progress
	size    int64 // bytes of the message in progress

	// topics are the distinct first frames of the messages accepted, at most maxTopics
	// of at most maxTopicBytes; tooManyTopics is set when one more did not fit.
	topics        []string
	tooManyTopics bool
}

// Bounds of the topics a connection's ConnError names: a publisher sends one topic per
// engine it serves, a few bytes each.
const (
	maxTopics     = 16
	maxTopicBytes = 256
)

// noteTopic records the first frame of a message.
func (s *scanner) noteTopic(frame []byte) {
	if s.tooManyTopics || (len(s.topics) > 0 && s.topics[len(s.topics)-1] == string(frame)) {
		return
	}
	for _, t := range s.topics {
		if t == string(frame) {
			return
		}
	}
	if len(s.topics) == maxTopics || len(frame) > maxTopicBytes {
		s.tooManyTopics = true
		return
	}
	s.topics = append(s.topics, string(frame))
}

// violation is a reason and a detail for an Error.
type violation struct {
	Reason Reason
	Detail string
}

// scan returns how many leading bytes of b are the greeting or whole frames within the
// limits. It reports a violation as soon as b shows one, in the header of a frame whose
// body has not arrived too.
func (s *scanner) scan(b []byte) (int, *violation) {
	done := 0
	if !s.greeted {
		if v := checkGreeting(b); v != nil {
			return 0, v
		}
		if len(b) < greetingLen {
			return 0, nil
		}
		s.greeted = true
		done = greetingLen
	}
	for {
		n, v := s.frame(b[done:])
		if v != nil || n == 0 {
			return done, v
		}
		done += n
	}
}

// checkGreeting checks what has arrived of a greeting: ZMTP's signature, version 3 or
// later, and the NULL mechanism, the only one the router speaks.
func checkGreeting(b []byte) *violation {
	const mechanism = "NULL"
	switch {
	case len(b) > 0 && b[0] != 0xff, len(b) > 9 && b[9] != 0x7f:
		return &violation{Malformed, "the peer sent no ZMTP signature"}
	case len(b) > 10 && b[10] < 3:
		return &violation{Malformed, fmt.Sprintf("the peer speaks ZMTP %d, not 3.x", b[10])}
	}
	for i := range 20 {
		if len(b) <= 12+i {
			break
		}
		want := byte(0)
		if i < len(mechanism) {
			want = mechanism[i]
		}
		if b[12+i] != want {
			return &violation{Malformed, "the peer's security mechanism is not NULL"}
		}
	}
	return nil
}

// frame checks the frame at the start of b: it returns its length when it is whole and
// valid, 0 when more must arrive.
func (s *scanner) frame(b []byte) (int, *violation) {
	if len(b) < 2 {
		return 0, nil
	}
	flags := b[0]
	if flags&^flagsKnown != 0 {
		return 0, &violation{Malformed, fmt.Sprintf("frame flags 0x%02x set reserved bits", flags)}
	}
	hdr, size := 2, uint64(b[1])
	if flags&flagLong != 0 {
		if len(b) < 9 {
			return 0, nil
		}
		hdr, size = 9, binary.BigEndian.Uint64(b[1:9])
	}
	if flags&flagCommand != 0 {
		if v := s.command(flags, size); v != nil {
			return 0, v
		}
	} else if v := s.part(size); v != nil {
		return 0, v
	}
	if uint64(len(b)-hdr) < size {
		return 0, nil
	}
	n := hdr + int(size)
	if flags&flagCommand != 0 {
		if v := s.commandBody(b[hdr:n]); v != nil {
			return 0, v
		}
		return n, nil
	}
	if s.parts == 0 {
		s.noteTopic(b[hdr:n])
	}
	s.parts++
	s.size += int64(size)
	if flags&flagMore == 0 {
		s.parts, s.size = 0, 0
	}
	return n, nil
}

// command checks a command frame's header.
func (s *scanner) command(flags byte, size uint64) *violation {
	switch {
	case flags&flagMore != 0:
		return &violation{Malformed, "a command frame has the MORE flag"}
	case s.parts > 0:
		return &violation{Malformed, "a command frame inside a multipart message"}
	case size > MaxCommandBytes:
		return &violation{TooLarge, fmt.Sprintf("a command frame declares %d bytes, over the limit of %d", size, MaxCommandBytes)}
	}
	return nil
}

// part checks a message frame's header against the message's limits.
func (s *scanner) part(size uint64) *violation {
	switch {
	case !s.ready:
		return &violation{Malformed, "a message frame before the READY command"}
	case s.parts >= s.lim.MaxParts:
		return &violation{TooManyParts, fmt.Sprintf("a message of more than %d frames", s.lim.MaxParts)}
	case size > uint64(s.lim.MaxMessageBytes-s.size):
		return &violation{TooLarge, fmt.Sprintf("a message frame declares %d bytes after %d, over the message limit of %d (kv_events.max_message_bytes)",
			size, s.size, s.lim.MaxMessageBytes)}
	}
	return nil
}

// socketTypes are the socket types zmq4 knows; it panics on a peer of another.
var socketTypes = map[zmq4.SocketType]bool{zmq4.Pair: true, zmq4.Pub: true, zmq4.Sub: true, zmq4.Req: true,
	zmq4.Rep: true, zmq4.Dealer: true, zmq4.Router: true, zmq4.Pull: true, zmq4.Push: true, zmq4.XPub: true, zmq4.XSub: true}

// commandBody checks a whole command: a name, and for READY metadata properties that
// each fit, which zmq4 reads without bounds checks, and a socket type zmq4 knows. The
// first command must be READY.
func (s *scanner) commandBody(body []byte) *violation {
	if len(body) == 0 || int(body[0]) > len(body)-1 {
		return &violation{Malformed, "a command frame whose name overruns it"}
	}
	name, props := string(body[1:1+body[0]]), body[1+body[0]:]
	if !s.ready && name != "READY" {
		return &violation{Malformed, fmt.Sprintf("the handshake began with %q, not READY", name)}
	}
	if name != "READY" {
		return nil
	}
	for len(props) > 0 {
		k := int(props[0])
		if len(props) < 1+k+4 {
			return &violation{Malformed, "READY metadata ends inside a property name"}
		}
		v := binary.BigEndian.Uint32(props[1+k:])
		props = props[1+k+4:]
		if uint64(v) > uint64(len(props)) {
			return &violation{Malformed, "READY metadata declares a value longer than the command"}
		}
		props = props[v:]
	}
	md := zmq4.Metadata{}
	if err := md.UnmarshalZMTP(body[1+body[0]:]); err != nil {
		return &violation{Malformed, fmt.Sprintf("READY metadata: %v", err)}
	}
	if t := zmq4.SocketType(md["Socket-Type"]); !socketTypes[t] {
		return &violation{Malformed, fmt.Sprintf("READY names the socket type %q", t)}
	}
	s.ready = true
	return nil
}
