package rawtcp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
)

// pair is a connected loopback pair: the accepted end as wrap makes it (raw) or as
// accepted (plain), and the dialled end, plain.
func pair(t *testing.T, raw bool) (c, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if raw {
		c = wrap(c)
		if _, ok := c.(*Conn); !ok && supported {
			t.Fatalf("wrap made a %T", c)
		}
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, peer
}

// outcome is what a scenario saw, compared between the raw and the plain connection.
type outcome struct {
	data               string
	n                  int
	eof, timeout       bool
	closed, opRead     bool
	opWrite, syscallEr bool
}

func classify(o *outcome, n int, err error) {
	o.n = n
	o.eof = err == io.EOF
	var ne net.Error
	o.timeout = errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
	o.closed = errors.Is(err, net.ErrClosed)
	var oe *net.OpError
	o.opRead = errors.As(err, &oe) && oe.Op == "read"
	o.opWrite = errors.As(err, &oe) && oe.Op == "write"
	var se *os.SyscallError
	o.syscallEr = errors.As(err, &se)
}

// The raw connection reads, writes, ends and fails as the net.Conn it wraps: each
// scenario runs on both and their outcomes must be equal.
func TestRawMatchesPlain(t *testing.T) {
	scenarios := map[string]func(t *testing.T, c, peer net.Conn) outcome{
		"read what the peer wrote": func(t *testing.T, c, peer net.Conn) outcome {
			peer.Write([]byte("hello"))
			var o outcome
			b := make([]byte, 16)
			n, err := io.ReadAtLeast(c, b, 5)
			classify(&o, n, err)
			o.data = string(b[:n])
			return o
		},
		"a read waits for the bytes": func(t *testing.T, c, peer net.Conn) outcome {
			go func() { time.Sleep(20 * time.Millisecond); peer.Write([]byte("late")) }()
			var o outcome
			b := make([]byte, 16)
			n, err := io.ReadAtLeast(c, b, 4)
			classify(&o, n, err)
			o.data = string(b[:n])
			return o
		},
		"EOF at the peer's close": func(t *testing.T, c, peer net.Conn) outcome {
			peer.Write([]byte("last"))
			peer.Close()
			var o outcome
			b, err := io.ReadAll(c)
			if err != nil {
				t.Errorf("reading to the end: %v", err)
			}
			o.data = string(b)
			_, err = c.Read(make([]byte, 4))
			classify(&o, len(b), err)
			return o
		},
		"read deadline": func(t *testing.T, c, peer net.Conn) outcome {
			c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			var o outcome
			n, err := c.Read(make([]byte, 4))
			classify(&o, n, err)
			return o
		},
		"read after close": func(t *testing.T, c, peer net.Conn) outcome {
			c.Close()
			var o outcome
			n, err := c.Read(make([]byte, 4))
			classify(&o, n, err)
			return o
		},
		"close ends a pending read": func(t *testing.T, c, peer net.Conn) outcome {
			go func() { time.Sleep(20 * time.Millisecond); c.Close() }()
			var o outcome
			n, err := c.Read(make([]byte, 4))
			classify(&o, n, err)
			return o
		},
		"empty read": func(t *testing.T, c, peer net.Conn) outcome {
			var o outcome
			n, err := c.Read(nil)
			classify(&o, n, err)
			return o
		},
		// 8 MiB is past any socket buffer: the write waits for the peer to read.
		"a large write waits for room": func(t *testing.T, c, peer net.Conn) outcome {
			big := bytes.Repeat([]byte("0123456789abcdef"), 512<<10)
			got := make(chan []byte)
			go func() { b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big)))); got <- b }()
			var o outcome
			n, err := c.Write(big)
			classify(&o, n, err)
			if b := <-got; !bytes.Equal(b, big) {
				t.Errorf("the peer read %d bytes, not the %d written", len(b), len(big))
			}
			return o
		},
		"write deadline": func(t *testing.T, c, peer net.Conn) outcome {
			c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			var o outcome
			_, err := c.Write(make([]byte, 32<<20)) // the peer never reads
			classify(&o, 0, err)                    // how much went is the kernel's
			return o
		},
		"write after close": func(t *testing.T, c, peer net.Conn) outcome {
			c.Close()
			var o outcome
			n, err := c.Write([]byte("x"))
			classify(&o, n, err)
			return o
		},
		"write to a peer that reset": func(t *testing.T, c, peer net.Conn) outcome {
			peer.(*net.TCPConn).SetLinger(0)
			peer.Close() // a reset
			time.Sleep(20 * time.Millisecond)
			var o outcome
			var err error
			for i := 0; i < 100 && err == nil; i++ {
				_, err = c.Write([]byte("x"))
				time.Sleep(time.Millisecond)
			}
			classify(&o, 0, err)
			o.syscallEr = o.syscallEr && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
			return o
		},
	}
	for name, run := range scenarios {
		t.Run(name, func(t *testing.T) {
			c, peer := pair(t, false)
			plain := run(t, c, peer)
			c, peer = pair(t, true)
			raw := run(t, c, peer)
			if raw != plain {
				t.Errorf("raw %+v, plain %+v", raw, plain)
			}
		})
	}
}

// Reads and writes from several goroutines at once, as a server's pending read beside
// its handler's writes, keep their bytes apart.
func TestConcurrentReadAndWrite(t *testing.T) {
	c, peer := pair(t, true)
	const rounds = 2000
	done := make(chan error, 2)
	go func() { // the peer echoes
		_, err := io.CopyN(peer, peer, rounds*4)
		done <- err
	}()
	go func() {
		for i := range rounds {
			if _, err := c.Write([]byte{byte(i), 1, 2, 3}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	got, err := io.ReadAll(io.LimitReader(c, rounds*4))
	if err != nil || len(got) != rounds*4 {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	for i := range rounds {
		if !bytes.Equal(got[i*4:i*4+4], []byte{byte(i), 1, 2, 3}) {
			t.Fatalf("chunk %d is %v", i, got[i*4:i*4+4])
		}
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// Quiet tells an open, quiet socket from one with bytes to read and one its peer closed.
func TestQuiet(t *testing.T) {
	fdOf := func(c net.Conn) uintptr {
		var fd uintptr
		rc, err := c.(interface {
			SyscallConn() (syscall.RawConn, error)
		}).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		rc.Control(func(f uintptr) { fd = f })
		return fd
	}
	c, peer := pair(t, true)
	if !Quiet(fdOf(c)) {
		t.Error("an open, quiet socket is not quiet")
	}
	peer.Write([]byte("x"))
	deadline := time.Now().Add(wait.Timeout)
	for Quiet(fdOf(c)) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if Quiet(fdOf(c)) {
		t.Error("a socket with a byte to read is quiet")
	}
	c2, peer2 := pair(t, true)
	peer2.Close()
	for Quiet(fdOf(c2)) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if Quiet(fdOf(c2)) {
		t.Error("a socket its peer closed is quiet")
	}
}

// Wrap leaves what is not a TCP connection as it is.
func TestWrapLeavesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if w := Wrap(a); w != a {
		t.Errorf("Wrap of a pipe made a %T", w)
	}
}
