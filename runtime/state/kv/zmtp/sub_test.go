package zmtp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/routerkit/router/internal/wait"
)

// TestSubReadsZMQ4Pub: a Sub subscribes to go-zeromq's PUB socket and receives what it
// publishes on the topic.
func TestSubReadsZMQ4Pub(t *testing.T) {
	pub := zmq4.NewPub(t.Context())
	defer pub.Close()
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	sub, err := DialSub(t.Context(), "tcp://"+pub.Addr().String(), &Config{}, "kv@E", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := make(chan [][]byte, 1)
	go func() {
		frames, err := sub.Recv()
		if err != nil {
			t.Error(err)
		}
		got <- [][]byte{bytes.Clone(frames[0]), bytes.Clone(frames[1])}
	}()
	for {
		// A PUB socket drops messages until the subscription has reached it.
		if err := pub.Send(zmq4.NewMsgFrom([]byte("kv@E"), []byte("payload"))); err != nil {
			t.Fatal(err)
		}
		select {
		case frames := <-got:
			if string(frames[0]) != "kv@E" || string(frames[1]) != "payload" {
				t.Fatalf("got %q", frames)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// peer accepts one Sub's connection as a raw ZMTP peer of socket type sockType: it
// checks the Sub's greeting, READY and subscription, and returns the connection.
func peer(t *testing.T, sockType string) (net.Conn, *Sub, *[]*Error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rejected := &[]*Error{}
	type dialled struct {
		s   *Sub
		err error
	}
	done := make(chan dialled, 1)
	go func() {
		s, err := DialSub(t.Context(), "tcp://"+ln.Addr().String(), &Config{Reject: func(e *Error) { *rejected = append(*rejected, e) }}, "kv", time.Second)
		done <- dialled{s, err}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(wait.Timeout))
	got := make([]byte, greetingLen)
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, greeting()) {
		t.Fatalf("the Sub's greeting %x, %v", got, err)
	}
	if _, err := c.Write(cat(greeting(), ready(sockType))); err != nil {
		t.Fatal(err)
	}
	want := cat(ready("SUB"), frame(0, []byte("\x01kv")))
	got = make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the Sub's READY and subscription %x, %v; want %x", got, err, want)
	}
	d := <-done
	if d.err != nil {
		t.Fatal(d.err)
	}
	t.Cleanup(func() { d.s.Close() })
	return c, d.s, rejected
}

// A Sub answers PING with PONG, skips messages of other topics (an XPUB peer sends every
// message), and keeps each message's frames apart.
func TestSubPingAndTopics(t *testing.T) {
	c, sub, _ := peer(t, "XPUB")
	ping := frame(flagCommand, []byte("\x04PING\x00\x0actx"))
	if _, err := c.Write(cat(ping, message([]byte("other"), []byte("x")), message([]byte("kv@E"), nil, []byte("payload")))); err != nil {
		t.Fatal(err)
	}
	frames, err := sub.Recv()
	if err != nil || len(frames) != 3 || string(frames[0]) != "kv@E" || len(frames[1]) != 0 || string(frames[2]) != "payload" {
		t.Fatalf("got %q, %v; want the message of topic kv@E", frames, err)
	}
	want := frame(flagCommand, []byte("\x04PONGctx"))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the answer to PING %x, %v; want %x", got, err, want)
	}
}

// A Sub's peer must publish; one that is not is closed and reported.
func TestSubRefusesNonPublishers(t *testing.T) {
	c, sub, rejected := peer(t, "PUSH")
	if _, err := c.Write(message([]byte("kv"))); err != nil {
		t.Fatal(err)
	}
	_, err := sub.Recv()
	var ended *ConnError
	if !errors.As(err, &ended) || len(*rejected) != 1 || (*rejected)[0].Reason != Malformed {
		t.Fatalf("err %v, rejected %v; want the PUSH peer closed as malformed", err, *rejected)
	}
}

// A Sub stops when its context is done.
func TestSubStopsWithContext(t *testing.T) {
	pub := zmq4.NewPub(t.Context())
	defer pub.Close()
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := DialSub(ctx, "tcp://"+pub.Addr().String(), &Config{}, "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	cancel()
	if _, err := sub.Recv(); err == nil {
		t.Fatal("Recv returned a message after the context was done")
	}
}

// A Sub reads a hostile peer's declared lengths as the Conn bounds them: the peer is
// closed before anything near the declared size is allocated.
func TestSubMemoryBound(t *testing.T) {
	for _, in := range [][]byte{hostile(), cat(greeting(), ready("PUB"), binary.BigEndian.AppendUint64([]byte{flagMore | flagLong}, 1<<40))} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := &Sub{c: NewConn(&wire{in: in, chunk: 4096}, &Config{}), stop: func() bool { return false }}
		_, err := s.Recv()
		runtime.ReadMemStats(&after)
		var ended *ConnError
		var closed *Error
		if !errors.As(err, &ended) || !errors.As(err, &closed) || closed.Reason != TooLarge {
			t.Errorf("err %v, want the connection closed as too large", err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("reading the hostile peer allocated %d bytes", d)
		}
	}
}
