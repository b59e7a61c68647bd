package zmtp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// wire is a peer that sends in, chunk bytes per read, and swallows what it is sent.
type wire struct {
	in    []byte
	chunk int
}

func (w *wire) Read(p []byte) (int, error) {
	if len(w.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), w.chunk)], w.in)
	w.in = w.in[n:]
	return n, nil
}

func (w *wire) Write(p []byte) (int, error)      { return len(p), nil }
func (w *wire) Close() error                     { return nil }
func (w *wire) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (w *wire) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 2} }
func (w *wire) SetDeadline(time.Time) error      { return nil }
func (w *wire) SetReadDeadline(time.Time) error  { return nil }
func (w *wire) SetWriteDeadline(time.Time) error { return nil }

// greeting is a ZMTP 3.0 NULL greeting, as libzmq sends it.
func greeting() []byte { return appendGreeting(nil) }

// frame encodes one frame, short or long as its size needs.
func frame(flags byte, body []byte) []byte { return appendFrame(nil, flags, body) }

// ready is a READY command with one Socket-Type property.
func ready(sockType string) []byte { return appendReady(nil, sockType) }

// message encodes a multipart message.
func message(parts ...[]byte) []byte {
	var b []byte
	for i, p := range parts {
		var more byte
		if i < len(parts)-1 {
			more = flagMore
		}
		b = append(b, frame(more, p)...)
	}
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// hostile is the reproduction of issue 25: a greeting, then a command frame header
// declaring a 1 TiB body; 73 bytes.
func hostile() []byte {
	return cat(greeting(), binary.BigEndian.AppendUint64([]byte{flagCommand | flagLong}, 1<<40))
}

// drain reads c to its end, as zmq4 would, and returns what it handed over and the error
// that ended it.
func drain(c *Conn) ([]byte, error) {
	var out []byte
	p := make([]byte, 7)
	for {
		n, err := c.Read(p)
		out = append(out, p[:n]...)
		if err != nil {
			return out, err
		}
	}
}

func TestConnRejects(t *testing.T) {
	lim := Limits{MaxMessageBytes: 1000, MaxParts: 3}
	hs := cat(greeting(), ready("PUB"))
	tests := []struct {
		name   string
		in     []byte
		reason Reason
		passed int // bytes handed over before the error
	}{
		{"issue 25: a 1 TiB command frame", hostile(), TooLarge, greetingLen},
		{"a 1 TiB message frame", cat(hs, binary.BigEndian.AppendUint64([]byte{flagLong}, 1<<40)), TooLarge, len(hs)},
		{"a frame over the message limit", cat(hs, frame(0, make([]byte, 1001))), TooLarge, len(hs)},
		{"parts over the message limit", cat(hs, frame(flagMore, make([]byte, 600)), frame(0, make([]byte, 401))), TooLarge, len(hs) + 609},
		{"a declared size with the top bit set", cat(hs, binary.BigEndian.AppendUint64([]byte{flagLong}, 1<<63)), TooLarge, len(hs)},
		{"too many parts", cat(hs, frame(flagMore, nil), frame(flagMore, nil), frame(flagMore, nil), frame(0, nil)), TooManyParts, len(hs) + 6},
		{"a command over its limit", cat(hs, frame(flagCommand, make([]byte, MaxCommandBytes+1))), TooLarge, len(hs)},
		{"no signature", []byte("GET / HTTP/1.1\r\n"), Malformed, 0},
		{"ZMTP 2", cat(greeting()[:10], []byte{1}), Malformed, 0},
		{"the CURVE mechanism", cat(greeting()[:12], []byte("CURVE")), Malformed, 0},
		{"reserved flag bits", cat(hs, []byte{0x08, 0}), Malformed, len(hs)},
		{"a message before READY", cat(greeting(), frame(0, []byte("kv"))), Malformed, greetingLen},
		{"a handshake that is not READY", cat(greeting(), frame(flagCommand, append([]byte{4}, "PING"...))), Malformed, greetingLen},
		{"a command name overrunning its frame", cat(greeting(), frame(flagCommand, []byte{9, 'R'})), Malformed, greetingLen},
		// zmq4 v0.17.0 panics on this one, in its accept goroutine: a slice out of range.
		{"READY metadata ending in a property", cat(greeting(), frame(flagCommand, append([]byte{5}, "READY\x00"...))), Malformed, greetingLen},
		{"READY metadata overrunning its value", cat(greeting(), frame(flagCommand, append([]byte{5}, "READY\x01k\x00\x00\x01\x00v"...))), Malformed, greetingLen},
		{"a command inside a message", cat(hs, frame(flagMore, nil), ready("PUB")), Malformed, len(hs) + 2},
		// zmq4 panics on a peer socket type it does not know.
		{"READY without a socket type", cat(greeting(), frame(flagCommand, append([]byte{5}, "READY"...))), Malformed, greetingLen},
		{"READY of an unknown socket type", cat(greeting(), ready("HUB")), Malformed, greetingLen},
		{"a command with MORE", cat(hs, frame(flagCommand|flagMore, append([]byte{4}, "PING"...))), Malformed, len(hs)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var reported *Error
			c := NewConn(&wire{in: tt.in, chunk: 5}, &Config{Limits: lim, Reject: func(e *Error) { reported = e }})
			out, err := drain(c)
			var e *Error
			if !errors.As(err, &e) || e.Reason != tt.reason {
				t.Fatalf("error %v, want reason %s", err, tt.reason)
			}
			if reported != e {
				t.Errorf("reported %v, want the error returned", reported)
			}
			if !bytes.Equal(out, tt.in[:tt.passed]) {
				t.Errorf("handed over %d bytes, want the first %d", len(out), tt.passed)
			}
		})
	}
}

func TestConnPassesValidStreams(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 200<<10) // longer than a read chunk
	in := cat(greeting(), ready("PUB"),
		message([]byte("kv@E"), make([]byte, 8), []byte{0x93}),
		frame(flagCommand, append([]byte{4}, "PING\x00\x01"...)), // a heartbeat between messages
		message([]byte("kv@E"), make([]byte, 8), big))
	for _, chunk := range []int{1, 3, 64 << 10} {
		var reported *Error
		c := NewConn(&wire{in: in, chunk: chunk}, &Config{Limits: Limits{MaxMessageBytes: 300 << 10, MaxParts: 3},
			Reject: func(e *Error) { reported = e }})
		out, err := drain(c)
		if !errors.Is(err, io.EOF) || reported != nil || !bytes.Equal(out, in) {
			t.Fatalf("chunk %d: handed over %d of %d bytes, err %v, reported %v; want all and EOF", chunk, len(out), len(in), err, reported)
		}
		// The end names the topics the peer's messages carried, once each.
		var ended *ConnError
		if !errors.As(err, &ended) || !slices.Equal(ended.Topics, []string{"kv@E"}) || ended.AllTopics {
			t.Fatalf("chunk %d: the end is %#v, want a ConnError naming topic kv@E", chunk, err)
		}
	}
}

// open runs zmq4's handshake as a SUB socket over in, bounded by lim, and reads the
// messages that follow.
func open(in []byte, lim Limits) (msgs []zmq4.Msg, err error) {
	zc, err := zmq4.Open(NewConn(&wire{in: in, chunk: 4096}, &Config{Limits: lim}), null.Security(), zmq4.Sub, zmq4.SocketIdentity("router"), true, nil)
	if err != nil {
		return nil, err
	}
	for {
		m, err := zc.RecvMsg()
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, m)
	}
}

func TestZMQ4ReadsThroughConn(t *testing.T) {
	msgs, err := open(cat(greeting(), ready("PUB"), message([]byte("kv@E"), []byte("12345678"), []byte{0x90})), Limits{})
	if !errors.Is(err, io.EOF) || len(msgs) != 1 || string(msgs[0].Frames[0]) != "kv@E" || len(msgs[0].Frames) != 3 {
		t.Fatalf("got %d messages, err %v; want the one message, then EOF", len(msgs), err)
	}
	// Unbounded, zmq4 would panic on this READY (see TestConnRejects) and allocate 1 TiB
	// for the hostile frame.
	for _, in := range [][]byte{cat(greeting(), frame(flagCommand, append([]byte{5}, "READY\x00"...))), hostile()} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := open(in, Limits{})
		runtime.ReadMemStats(&after)
		if !strings.Contains(err.Error(), "zmtp: connection with 127.0.0.2:2 closed") {
			t.Errorf("err %v, want the bound's", err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("the handshake allocated %d bytes", d)
		}
	}
}

// FuzzConn feeds arbitrary peers' bytes through a Conn and zmq4's reader, and through a
// Sub: nothing panics, what the Conn hands over is a prefix of the input, what it buffers
// stays proportional to the input, whatever the frames declare, and the Sub's messages
// are within the limits.
func FuzzConn(f *testing.F) {
	hs := cat(greeting(), ready("PUB"))
	f.Add(hostile(), uint8(5))
	f.Add(cat(hs, message([]byte("kv@E"), make([]byte, 8), []byte{0x93, 1, 2, 3})), uint8(1))
	f.Add(cat(hs, binary.BigEndian.AppendUint64([]byte{flagLong}, 1<<40)), uint8(9))
	f.Add(cat(greeting(), frame(flagCommand, append([]byte{5}, "READY\x00"...))), uint8(64))
	f.Add(cat(hs, frame(flagMore, nil), frame(flagMore, []byte("a")), frame(0, []byte("b"))), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		c := NewConn(&wire{in: in, chunk: int(chunk) + 1}, &Config{Limits: Limits{MaxMessageBytes: 1 << 16}})
		out, _ := drain(c)
		if !bytes.HasPrefix(in, out) {
			t.Fatal("handed over bytes that are not the input's")
		}
		if limit := 2*len(in) + 2*readChunk; cap(c.buf) > limit {
			t.Fatalf("buffered %d bytes for %d of input", cap(c.buf), len(in))
		}
		_, _ = open(in, Limits{MaxMessageBytes: 1 << 16})
		subReads(t, in, chunk)
	})
}

// A peer that connects and stays silent is dropped at the handshake deadline, and one
// that completes the handshake is not held to it afterwards.
func TestHandshakeDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, handshake := range [][]byte{nil, cat(greeting(), ready("PUB"))} {
		peer, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		raw, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		var reported *Error
		c := NewConn(raw, &Config{Limits: Limits{HandshakeTimeout: 50 * time.Millisecond}, Reject: func(e *Error) { reported = e }})
		if _, err := peer.Write(handshake); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(handshake))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if handshake == nil {
			_, err = c.Read(make([]byte, 1))
			var e *Error
			if !errors.As(err, &e) || e.Reason != HandshakeTimeout || reported != e {
				t.Fatalf("a silent peer: err %v, reported %v; want a handshake timeout", err, reported)
			}
			continue
		}
		time.Sleep(100 * time.Millisecond) // past the handshake deadline
		if _, err := peer.Write(message([]byte("kv"))); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 4)); err != nil || reported != nil {
			t.Fatalf("after the handshake: err %v, reported %v; want the message", err, reported)
		}
	}
}

// TestConnErrorTopicsAreBounded: a peer that sends more distinct topics than a ConnError
// records (or a longer one) is marked as having fed every topic, so a listener clears
// all it serves rather than keep what that peer may have fed.
func TestConnErrorTopicsAreBounded(t *testing.T) {
	in := cat(greeting(), ready("PUB"))
	for i := range maxTopics {
		in = cat(in, message([]byte{'t', byte('a' + i)}, []byte{0}))
	}
	c := NewConn(&wire{in: in, chunk: 64 << 10}, &Config{})
	_, err := drain(c)
	var ended *ConnError
	if !errors.As(err, &ended) || len(ended.Topics) != maxTopics || ended.AllTopics {
		t.Fatalf("after %d topics the end is %#v, want all of them named", maxTopics, err)
	}
	c = NewConn(&wire{in: cat(in, message([]byte("one more"), []byte{0})), chunk: 64 << 10}, &Config{})
	if _, err = drain(c); !errors.As(err, &ended) || !ended.AllTopics {
		t.Fatalf("after %d topics the end is %#v, want AllTopics", maxTopics+1, err)
	}
}

// subReads reads in through a Sub, as a peer's bytes after the Sub's handshake, and checks
// that its messages are within the limits and its buffers proportional to the input.
func subReads(t *testing.T, in []byte, chunk uint8) {
	const maxBytes = 1 << 16
	s := &Sub{c: NewConn(&wire{in: in, chunk: int(chunk) + 1}, &Config{Limits: Limits{MaxMessageBytes: maxBytes}}), stop: func() bool { return false }}
	for {
		frames, err := s.Recv()
		if err != nil {
			break
		}
		size := 0
		for _, f := range frames {
			size += len(f)
		}
		if len(frames) == 0 || len(frames) > DefaultMaxParts || size > maxBytes {
			t.Fatalf("a message of %d frames and %d bytes", len(frames), size)
		}
	}
	if limit := 2*len(in) + 2*readChunk; cap(s.c.buf) > limit || cap(s.msg) > 2*len(in) {
		t.Fatalf("buffered %d and %d bytes for %d of input", cap(s.c.buf), cap(s.msg), len(in))
	}
}
