// Package rawtcp holds a TCP connection whose reads and writes are raw system calls.
//
// A read or write on a net.Conn goes through the scheduler's bookkeeping for a system
// call that may block (entersyscall, exitsyscall), and each one wakes sysmon when sysmon
// sleeps because every P was idle. At one client the router's process is idle between
// every request, the engine's answer and the next request, so each request woke sysmon,
// which then polled every 20 µs until the process was idle again: about a sixth of the
// router's CPU at one client (docs/benchmarks.md, "Per-request CPU with Qwen3", session
// 7). A socket's reads and writes never block (Go's sockets are non-blocking; the wait
// for readiness is the netpoller's either way), so a Conn makes them raw, through the
// connection's syscall.RawConn: the netpoller's waits, deadlines and Close work as on
// the net.Conn it wraps, whose other methods it keeps.
//
// ROUTER_RAW_TCP=off in the environment turns it off: Wrap returns its argument.
package rawtcp

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Off is the switch back to net.Conn's own reads and writes, read once at start.
var Off = os.Getenv("ROUTER_RAW_TCP") == "off"

// Conn is a *net.TCPConn whose Read and Write are raw system calls. It holds the
// connection as a net.Conn, not by embedding *net.TCPConn, so that the TCPConn's
// ReadFrom, WriteTo and writev (net.Buffers) are not promoted: each would make net's own
// calls and wake sysmon, as a 620 kB request body written with net.Buffers did (session
// 7). A net.Buffers written to a Conn goes out a raw write per part.
type Conn struct {
	net.Conn
	tcp *net.TCPConn
	rc  syscall.RawConn

	// The current Read's and Write's buffer and outcome, which read and write (the
	// functions handed to rc, made once per connection) use: each under its mutex, since
	// a net.Conn may be read and written from several goroutines at once.
	rmu, wmu   sync.Mutex
	rp, wp     []byte
	rn, wn     int
	rerr, werr syscall.Errno
	read       func(fd uintptr) bool
	write      func(fd uintptr) bool
	// writeRead is WriteRead's function: it writes wp, then reads into rp once the
	// socket is readable; stalled is set when the write met a full socket buffer.
	writeRead func(fd uintptr) bool
	stalled   bool
}

// Wrap returns c as a Conn when it is a *net.TCPConn on a system with raw calls, and c
// itself otherwise or when Off.
func Wrap(c net.Conn) net.Conn {
	if Off || !supported {
		return c
	}
	return wrap(c)
}

func wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &Conn{Conn: tc, tcp: tc, rc: rc}
	r.read, r.write, r.writeRead = r.readFD, r.writeFD, r.writeReadFD
	return r
}

// readFD reads into rp once; false (EAGAIN) makes rc wait until the socket is readable.
func (c *Conn) readFD(fd uintptr) bool {
	for {
		n, errno := read(fd, c.rp)
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rn, c.rerr = n, errno
		return true
	}
}

// writeFD writes what is left of wp; false (EAGAIN) makes rc wait for room.
func (c *Conn) writeFD(fd uintptr) bool {
	for c.wn < len(c.wp) {
		n, errno := write(fd, c.wp[c.wn:])
		switch errno {
		case 0:
			c.wn += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = errno
			return true
		}
	}
	return true
}

// SyscallConn is the connection's, for a raw peek (upstream's liveness check).
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }

// CloseWrite shuts the connection's writing side, as h1 does before closing.
func (c *Conn) CloseWrite() error { return c.tcp.CloseWrite() }

// Read reads as net.Conn's Read does: io.EOF at the peer's end, a *net.OpError of op
// "read" for a failure, a closed connection or a deadline.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rp, c.rn, c.rerr = p, 0, 0
	return c.readOutcome(c.rc.Read(c.read))
}

// readOutcome is what a Read returns after rc.Read returned err, and ends the read.
func (c *Conn) readOutcome(err error) (int, error) {
	c.rp = nil
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case c.rerr != 0:
		return 0, c.opError("read", os.NewSyscallError("read", c.rerr))
	case c.rn == 0:
		return 0, io.EOF
	}
	return c.rn, nil
}

// Write writes all of p, as net.Conn's Write does, or returns how much went and a
// *net.OpError of op "write".
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wp, c.wn, c.werr = p, 0, 0
	return c.writeOutcome(c.rc.Write(c.write))
}

// writeOutcome is what a Write returns after rc.Write returned err, and ends the write.
func (c *Conn) writeOutcome(err error) (int, error) {
	n := c.wn
	c.wp = nil
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case c.werr != 0:
		return n, c.opError("write", os.NewSyscallError("write", c.werr))
	}
	return n, nil
}

// WriteRead writes all of w and then reads into p: what c.Write(w) and then c.Read(p)
// would return, the write's error in werr and the read's count and error in n and err.
// On a Conn, a write made whole is not followed by a read that finds nothing: the wait
// for the answer begins at once, which saves a system call a dispatch, an engine's
// answer being never there at once (docs/benchmarks.md, "One read fewer a dispatch").
//
// Read reads the socket before it waits, since bytes may have come before the wait
// began, and the wait (edge-triggered) sees only what comes after. WriteRead writes
// within the wait, after that point, so it is for a request none of which the peer has
// had yet, on a connection with nothing unread: the answer comes after the write and
// wakes the wait. An answer to bytes written before (an engine may answer part of a
// request) could have come before the wait, and would not wake it. A write that fails
// or meets a full buffer is followed by Write's wait and Read's read-first: the peer may
// have answered before it closed.
func WriteRead(c net.Conn, w, p []byte) (n int, werr, err error) {
	rc, ok := c.(*Conn)
	if !ok || len(w) == 0 || len(p) == 0 {
		if len(w) > 0 {
			_, werr = c.Write(w)
		}
		n, err = c.Read(p)
		return n, werr, err
	}
	return rc.writeThenRead(w, p)
}

func (c *Conn) writeThenRead(w, p []byte) (n int, werr, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.wp, c.wn, c.werr, c.stalled = w, 0, 0, false
	c.rp, c.rn, c.rerr = p, 0, 0
	rerr := c.rc.Read(c.writeRead)
	switch {
	case rerr != nil && c.wn < len(w):
		// The read's wait ended (a deadline, a close) before the write, a failure of
		// both: the write's error is a copy, opError naming its op in place.
		_, werr = c.writeOutcome(twin(rerr))
	case c.stalled:
		// The socket's buffer is full: the rest waits for room as Write's does.
		_, werr = c.writeOutcome(c.rc.Write(c.write))
		n, err = c.readOutcome(c.rc.Read(c.read))
		return n, werr, err
	case c.werr != 0:
		_, werr = c.writeOutcome(nil)
		n, err = c.readOutcome(c.rc.Read(c.read))
		return n, werr, err
	default:
		c.wp = nil
	}
	n, err = c.readOutcome(rerr)
	return n, werr, err
}

// twin is a copy of err when it is a *net.OpError, and err otherwise.
func twin(err error) error {
	if oe, ok := err.(*net.OpError); ok {
		c := *oe
		return &c
	}
	return err
}

// writeReadFD writes what is left of wp and, once it is written, waits for the socket to
// be readable before its first read (see WriteRead). It ends the read's wait when the
// write fails or meets a full buffer, for writeThenRead to go on.
func (c *Conn) writeReadFD(fd uintptr) bool {
	if c.wn == len(c.wp) {
		return c.readFD(fd)
	}
	if !c.writeFD(fd) {
		c.stalled = true
		return true
	}
	return c.werr != 0 // written whole: wait for the answer, not read for it
}

// opError is err as net.Conn's Read or Write names it. rc's own errors (closed, a
// deadline) come as a *net.OpError of op "raw-read" or "raw-write", renamed.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
		return oe
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Listener wraps ln's accepted connections (see Wrap).
func Listener(ln net.Listener) net.Listener {
	if Off || !supported {
		return ln
	}
	return listener{ln}
}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrap(c), nil
}
