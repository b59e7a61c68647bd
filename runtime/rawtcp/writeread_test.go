package rawtcp

import (
	"bytes"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WriteRead returns what Write and then Read return, on a raw connection (where the two
// are one wait) as on a plain one (where they are the two calls): each scenario runs on
// both and their outcomes must be equal.
func TestWriteReadMatchesWriteThenRead(t *testing.T) {
	scenarios := map[string]func(t *testing.T, c, peer net.Conn) (w, p []byte){
		"the peer answers what it read": func(t *testing.T, c, peer net.Conn) ([]byte, []byte) {
			go func() {
				b := make([]byte, 8)
				n, _ := io.ReadFull(peer, b[:7])
				time.Sleep(10 * time.Millisecond)
				peer.Write(bytes.ToUpper(b[:n]))
			}()
			return []byte("request"), make([]byte, 16)
		},
		"the peer reset before the write": func(t *testing.T, c, peer net.Conn) ([]byte, []byte) {
			peer.(*net.TCPConn).SetLinger(0)
			peer.Close()
			time.Sleep(20 * time.Millisecond)
			return []byte("request"), make([]byte, 16)
		},
		"the peer answered and closed before the write": func(t *testing.T, c, peer net.Conn) ([]byte, []byte) {
			peer.Write([]byte("early"))
			peer.Close()
			time.Sleep(20 * time.Millisecond)
			return []byte("request"), make([]byte, 16)
		},
		// 8 MiB is past any socket buffer: the write waits for room, as Write's does.
		"a large write waits for room": func(t *testing.T, c, peer net.Conn) ([]byte, []byte) {
			big := bytes.Repeat([]byte("0123456789abcdef"), 512<<10)
			go func() {
				n, _ := io.Copy(io.Discard, io.LimitReader(peer, int64(len(big))))
				peer.Write([]byte(strconv.FormatInt(n, 10)))
			}()
			return big, make([]byte, 16)
		},
		"a deadline that passed": func(t *testing.T, c, peer net.Conn) ([]byte, []byte) {
			c.SetDeadline(time.Now().Add(-time.Second))
			return []byte("request"), make([]byte, 16)
		},
		"no answer within the read deadline": func(t *testing.T, c, peer net.Conn) ([]byte, []byte) {
			c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			return []byte("request"), make([]byte, 16)
		},
		"a closed connection": func(t *testing.T, c, peer net.Conn) ([]byte, []byte) {
			c.Close()
			return []byte("request"), make([]byte, 16)
		},
		"nothing to write": func(t *testing.T, c, peer net.Conn) ([]byte, []byte) {
			peer.Write([]byte("unasked"))
			return nil, make([]byte, 16)
		},
	}
	for name, setup := range scenarios {
		t.Run(name, func(t *testing.T) {
			var outcomes [2][2]outcome
			for i, raw := range []bool{false, true} {
				c, peer := pair(t, raw)
				w, p := setup(t, c, peer)
				n, werr, err := WriteRead(c, w, p)
				classify(&outcomes[i][0], 0, werr)
				classify(&outcomes[i][1], n, err)
				outcomes[i][1].data = string(p[:n])
				// A reset's error is ECONNRESET or EPIPE, by the kernel's timing.
				outcomes[i][0].syscallEr = outcomes[i][0].syscallEr || werr != nil && strings.Contains(werr.Error(), "broken pipe")
			}
			if outcomes[0] != outcomes[1] {
				t.Errorf("raw write %+v, read %+v; plain write %+v, read %+v", outcomes[1][0], outcomes[1][1], outcomes[0][0], outcomes[0][1])
			}
		})
	}
}

// threadReads is how many read system calls this thread has made
// (/proc/thread-self/io's syscr).
func threadReads(t *testing.T) int {
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Skipf("no per-thread I/O counts here: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no syscr in %q", b)
	return 0
}

// A raw connection's WriteRead reads the socket once for an answer that comes after the
// request, where Write and then Read read it twice: once finding nothing, once the
// answer. The reads are counted by the kernel for this goroutine's thread, to which it is
// locked; the peer answers from another.
func TestWriteReadSkipsTheEmptyRead(t *testing.T) {
	if !supported {
		t.Skip("no raw calls on this system")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Reading the counts reads too: as many reads as two reads of the counts make.
	before := threadReads(t)
	own := threadReads(t) - before
	count := func(raw bool, exchange func(c net.Conn, w, p []byte) error) int {
		c, peer := pair(t, raw)
		go func() {
			b := make([]byte, 7)
			if _, err := io.ReadFull(peer, b); err == nil {
				time.Sleep(10 * time.Millisecond)
				peer.Write(b)
			}
		}()
		p := make([]byte, 16)
		start := threadReads(t)
		if err := exchange(c, []byte("request"), p); err != nil {
			t.Fatal(err)
		}
		return threadReads(t) - start - own
	}
	fused := count(true, func(c net.Conn, w, p []byte) error {
		_, werr, err := WriteRead(c, w, p)
		if werr != nil {
			return werr
		}
		return err
	})
	apart := count(true, func(c net.Conn, w, p []byte) error {
		if _, err := c.Write(w); err != nil {
			return err
		}
		_, err := c.Read(p)
		return err
	})
	if fused != 1 || apart != 2 {
		t.Errorf("reads of the socket: WriteRead %d, Write and Read %d; want 1 and 2", fused, apart)
	}
}
