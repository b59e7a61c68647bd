package server

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// acceptPair returns the server side of a fresh connection accepted through l, and the
// client side.
func acceptPair(t *testing.T, l *clientListener, addr string) (*clientConn, net.Conn) {
	t.Helper()
	dialed := make(chan net.Conn, 1)
	go func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Error(err)
		}
		dialed <- c
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	client := <-dialed
	t.Cleanup(func() { c.Close(); client.Close() })
	return c.(*clientConn), client
}

func TestClientListenerReleasesOnClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := newConnWatch()
	l := newClientListener(ln, 1, w)
	defer l.Close()
	c, _ := acceptPair(t, l, ln.Addr().String())
	if len(l.sem) != 1 || len(w.conns) != 1 {
		t.Fatalf("%d slots taken and %d connections watched with one connection open", len(l.sem), len(w.conns))
	}
	c.Close()
	c.Close() // a second close must not free a second slot
	if len(l.sem) != 0 || len(w.conns) != 0 {
		t.Fatalf("%d slots taken and %d connections watched after close", len(l.sem), len(w.conns))
	}
}

// readErr reads once from c with a guard against waiting forever, and returns the
// error (nil when data came).
func readErr(t *testing.T, c net.Conn, guard time.Duration) error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 16))
		got <- err
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(guard):
		t.Fatalf("a read still blocked after %v", guard)
		return nil
	}
}

func TestClientConnDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := newConnWatch()
	l := newClientListener(ln, 0, w)
	defer l.Close()
	c, client := acceptPair(t, l, ln.Addr().String())

	// A far deadline is noted, not put on the socket: data still reads after it passed,
	// until a sweep sees it.
	due := time.Now().Add(time.Hour)
	if err := c.SetReadDeadline(due); err != nil {
		t.Fatal(err)
	}
	w.sweep(due.Add(-time.Second).UnixNano())
	client.Write([]byte("a"))
	if err := readErr(t, c, 5*time.Second); err != nil {
		t.Fatalf("read before the noted deadline passed: %v", err)
	}
	// The sweep after it puts it on the socket, which fails a blocked read.
	blocked := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 16))
		blocked <- err
	}()
	time.Sleep(20 * time.Millisecond)
	w.sweep(due.UnixNano())
	select {
	case err := <-blocked:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("blocked read after the sweep: %v, want a deadline error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read blocked past its swept deadline")
	}

	// A new deadline clears the expired one from the socket.
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	client.Write([]byte("b"))
	if err := readErr(t, c, 5*time.Second); err != nil {
		t.Fatalf("read after a new deadline: %v", err)
	}
	// So does no deadline.
	w.sweep(time.Now().Add(2 * time.Hour).UnixNano())
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	client.Write([]byte("c"))
	if err := readErr(t, c, 5*time.Second); err != nil {
		t.Fatalf("read after clearing the deadline: %v", err)
	}

	// A near deadline goes to the socket at once: no sweep is needed.
	if err := c.SetReadDeadline(time.Now().Add(watchTick / 2)); err != nil {
		t.Fatal(err)
	}
	if err := readErr(t, c, 5*time.Second); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past a near deadline: %v, want a deadline error", err)
	}
}
