package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/state/kv/zmtp"
)

// hostileGreeting is issue 25's reproduction: a ZMTP 3.0 NULL greeting and a command
// frame header declaring a 1 TiB body, 73 bytes. Unbounded, zmq4 allocates the 1 TiB
// during the handshake and the process dies of it.
func hostileGreeting() []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	return binary.BigEndian.AppendUint64(append(g, 0x06), 1<<40)
}

// syncBuffer is a log sink safe for the subscribers' goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// subscribe starts p's subscribers, logging to the returned buffer, until the test ends.
func subscribe(t *testing.T, p *plan.Plan) (*Index, *syncBuffer) {
	t.Helper()
	ix := NewIndex(p)
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	sub, err := Subscribe(ctx, p, ix, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); sub.Wait() })
	return ix, logs
}

// totalAlloc is the bytes the process has allocated so far.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// untilClosed reads c until the router closes it, and returns what it sent.
func untilClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait.Timeout))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the router did not close the connection: %v", err)
	}
	return b
}

func TestHostileFrameAtBindListener(t *testing.T) {
	endpoint := "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))
	p := &plan.Plan{Engines: []plan.Engine{{ID: "A", Model: "m", URL: "http://127.0.0.1:8000",
		KVEvents: &plan.KVEvents{Mode: plan.KVBind, Endpoint: endpoint, Topic: "kv@A@m", BlockSize: 16}}}}
	ix, logs := subscribe(t, p)

	var c net.Conn
	wait.For(t, "the listener", func() bool {
		var err error
		c, err = net.Dial("tcp", strings.TrimPrefix(endpoint, "tcp://"))
		return err == nil
	})
	defer c.Close()
	before := totalAlloc()
	if _, err := c.Write(hostileGreeting()); err != nil {
		t.Fatal(err)
	}
	untilClosed(t, c)
	wait.For(t, "the rejection counted", func() bool { return ix.Rejected(zmtp.TooLarge) == 1 })
	d := totalAlloc() - before
	t.Logf("a 1 TiB frame header cost %d bytes", d)
	if d > 1<<20 {
		t.Errorf("a 1 TiB frame header cost %d bytes", d)
	}
	// The rejection is counted before its log line is written: wait for the line too.
	wait.For(t, "a log line saying why the peer was dropped", func() bool {
		return strings.Contains(logs.String(), "reason=too_large")
	})

	// The router still serves: a well-behaved publisher's events are indexed.
	joinBind(t, dialPub(t, endpoint, "kv@A@m"), ix, 0, 100)
}

func TestHostileFrameAtDialer(t *testing.T) {
	// A "publisher" that answers every connection with the hostile greeting and frame.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	closed := make(chan []byte, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := c.Write(hostileGreeting()); err != nil {
					return
				}
				b, _ := io.ReadAll(c)
				closed <- b
			}()
		}
	}()
	p := &plan.Plan{Engines: []plan.Engine{{ID: "E", Model: "m",
		KVEvents: &plan.KVEvents{Endpoint: "tcp://" + addr, Topic: "kv@E", BlockSize: 16}}}}
	before := totalAlloc()
	ix, logs := subscribe(t, p)
	select {
	case <-closed: // the router hung up after the frame header
	case <-time.After(wait.Timeout):
		t.Fatal("the router did not close the hostile publisher's connection")
	}
	wait.For(t, "the rejection counted", func() bool { return ix.Rejected(zmtp.TooLarge) >= 1 })
	d := totalAlloc() - before
	t.Logf("a 1 TiB frame header cost %d bytes", d)
	if d > 1<<20 {
		t.Errorf("a 1 TiB frame header cost %d bytes", d)
	}
	// The rejection is counted before its log line is written: wait for the line too.
	wait.For(t, "a log line saying why the peer was dropped", func() bool {
		return strings.Contains(logs.String(), "reason=too_large")
	})

	// A real publisher at the same address is followed once the hostile one is gone.
	ln.Close()
	join(t, listen(t, addr), ix, 0, 100)
}

func TestMessageLimitIsPerSubscription(t *testing.T) {
	pub := listen(t, "127.0.0.1:0")
	p := &plan.Plan{Engines: []plan.Engine{{ID: "E", Model: "m",
		KVEvents: &plan.KVEvents{Endpoint: "tcp://" + pub.addr, Topic: "kv@E", BlockSize: 16, MaxMessageBytes: 64 << 10}}}}
	ix, _ := subscribe(t, p)
	seq := join(t, pub, ix, 0, 100)

	// 70 KiB of padding in the batch: over this engine's 64 KiB, under the default.
	big := encode(t, []any{1.0, []any{[]any{"BlockStored", []any{int64(200)}, nil, []any{}, 16}}, 0, strings.Repeat("x", 70<<10)})
	wait.For(t, "the oversized message refused", func() bool {
		pub.send(seq, big)
		return ix.Rejected(zmtp.TooLarge) > 0
	})
	if holds(ix, 200) {
		t.Fatal("a message over max_message_bytes was indexed")
	}
	join(t, pub, ix, seq+1, 300) // the subscriber redials and goes on
}

// dialFrom connects to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestBindAllowList(t *testing.T) {
	port := strconv.Itoa(freePort(t))
	addr := "127.0.0.1:" + port
	engine := func(id, url string, allow ...string) plan.Engine {
		return plan.Engine{ID: id, Model: "m", URL: url, KVEvents: &plan.KVEvents{Mode: plan.KVBind,
			Endpoint: "tcp://" + addr, Topic: "kv@" + id, BlockSize: 16, AllowFrom: allow}}
	}
	// A's publishers may come from 127.0.0.2 only; B's host is not loopback, so by
	// default nothing local may publish for it.
	ix, logs := subscribe(t, &plan.Plan{Engines: []plan.Engine{
		engine("A", "http://127.0.0.1:8000", "127.0.0.2"),
		engine("B", "http://192.0.2.7:8000"),
	}})
	wait.For(t, "the listener", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	wait.For(t, "the probe refused", func() bool { return ix.Rejected(zmtp.NotAllowed) == 1 })

	// Refused: closed before the router's greeting, so not a byte comes back.
	if b := untilClosed(t, dialFrom(t, "127.0.0.1", addr)); len(b) != 0 {
		t.Fatalf("a refused peer got %d bytes of handshake", len(b))
	}
	wait.For(t, "the refusal counted", func() bool { return ix.Rejected(zmtp.NotAllowed) == 2 })
	if !strings.Contains(logs.String(), "reason=not_allowed") {
		t.Errorf("no log line says why the peer was refused:\n%s", logs)
	}

	// Allowed: the router answers with its greeting.
	if !greeted("127.0.0.2", addr) {
		t.Fatal("an allowed peer got no ZMTP signature")
	}
	if n := ix.Rejected(zmtp.NotAllowed); n != 2 {
		t.Fatalf("refusals = %d, want still 2", n)
	}
}

func TestAllowFrom(t *testing.T) {
	loopbackAll := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		url   string
		allow []string
		want  []netip.Prefix
	}{
		{url: "http://10.1.2.3:8000", want: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32")}},
		{url: "http://127.0.0.1:8000", want: loopbackAll},
		{url: "http://[::1]:8000", want: loopbackAll},
		{url: "http://10.1.2.3:8000", allow: []string{"10.0.0.0/24", "127.0.0.2", "fd00::1", "10.9.9.9/8"},
			want: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("127.0.0.2/32"),
				netip.MustParsePrefix("fd00::1/128"), netip.MustParsePrefix("10.0.0.0/8")}},
		{url: "", want: nil},
	}
	for _, tt := range tests {
		e := plan.Engine{ID: "E", URL: tt.url, KVEvents: &plan.KVEvents{Mode: plan.KVBind, AllowFrom: tt.allow}}
		if got := allowFrom(e, slog.New(slog.DiscardHandler)); !slices.Equal(got, tt.want) {
			t.Errorf("allowFrom(%q, %q) = %v, want %v", tt.url, tt.allow, got, tt.want)
		}
	}
	a := allowList{netip.MustParsePrefix("10.0.0.0/24")}
	if !a.allows(netip.MustParseAddr("10.0.0.9")) || a.allows(netip.MustParseAddr("10.0.1.9")) {
		t.Error("allows does not follow the prefix")
	}
}

// greeted reports whether the router answers a connection from src with its ZMTP
// signature, rather than closing it unanswered or not listening.
func greeted(src, addr string) bool {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(wait.Timeout))
	sig := make([]byte, 10)
	_, err = io.ReadFull(c, sig)
	return err == nil && sig[0] == 0xff && sig[9] == 0x7f
}

func TestReloadChangesTheAllowList(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	engine := func(allow string) plan.Engine {
		return plan.Engine{ID: "A", Model: "m", URL: "http://127.0.0.1:8000", KVEvents: &plan.KVEvents{Mode: plan.KVBind,
			Endpoint: "tcp://" + addr, Topic: "kv@A", BlockSize: 16, AllowFrom: []string{allow}}}
	}
	ix := NewIndex(&plan.Plan{Engines: []plan.Engine{engine("127.0.0.2")}})
	ctx, cancel := context.WithCancel(t.Context())
	subs := NewSubscriptions(ctx, ix, slog.New(slog.DiscardHandler))
	defer func() { cancel(); subs.Wait() }()
	if errs := subs.Set([]plan.Engine{engine("127.0.0.2")}); len(errs) > 0 {
		t.Fatal(errs)
	}
	wait.For(t, "the listener", func() bool { return greeted("127.0.0.2", addr) })
	if greeted("127.0.0.3", addr) {
		t.Fatal("a peer outside allow_from was greeted")
	}
	if errs := subs.Set([]plan.Engine{engine("127.0.0.3")}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if !greeted("127.0.0.3", addr) || greeted("127.0.0.2", addr) {
		t.Fatal("the running listener kept its old allow-list")
	}
}
