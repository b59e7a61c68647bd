package zmtp

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// BenchmarkSubRecv is one KV-event-sized message (three frames, 2 KiB) published and
// received at a time, as an engine's batches arrive at an idle router: a raw ZMTP
// publisher writes the message when asked, and the op ends when the subscriber has it.
// "sub" reads with a Sub in the receiving goroutine, "zmq4" with go-zeromq's SUB socket
// (its reader goroutine, then a channel to Recv) over the same bounded Conn.
func BenchmarkSubRecv(b *testing.B) {
	msg := message([]byte("kv@E"), make([]byte, 8), make([]byte, 2048))
	for _, reader := range []string{"sub", "zmq4"} {
		b.Run(reader, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			send := make(chan struct{})
			go publish(b, ln, msg, send)
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()
			var recv func() ([][]byte, error)
			if reader == "sub" {
				sub, err := DialSub(ctx, "tcp://"+ln.Addr().String(), &Config{}, "kv@E", time.Second)
				if err != nil {
					b.Fatal(err)
				}
				defer sub.Close()
				recv = sub.Recv
			} else {
				sock := zmq4.NewSub(WithConfig(ctx, &Config{}))
				defer sock.Close()
				if err := sock.Dial(Endpoint("tcp://" + ln.Addr().String())); err != nil {
					b.Fatal(err)
				}
				if err := sock.SetOption(zmq4.OptionSubscribe, "kv@E"); err != nil {
					b.Fatal(err)
				}
				recv = func() ([][]byte, error) { m, err := sock.Recv(); return m.Frames, err }
			}
			b.ReportAllocs()
			for b.Loop() {
				send <- struct{}{}
				frames, err := recv()
				if err != nil || len(frames) != 3 || len(frames[2]) != 2048 {
					b.Fatalf("got %d frames, %v", len(frames), err)
				}
			}
			close(send)
		})
	}
}

// publish accepts one subscriber on ln as a PUB peer and writes msg once per value
// received on send, discarding what the subscriber sends.
func publish(b *testing.B, ln net.Listener, msg []byte, send <-chan struct{}) {
	c, err := ln.Accept()
	if err != nil {
		b.Error(err)
		return
	}
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, greetingLen)); err != nil {
		b.Error(err)
		return
	}
	if _, err := c.Write(cat(greeting(), ready("PUB"))); err != nil {
		b.Error(err)
		return
	}
	go func() { _, _ = io.Copy(io.Discard, c) }()
	for range send {
		if _, err := c.Write(msg); err != nil {
			b.Error(err)
			return
		}
	}
}
