//go:build unix

package upstream

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open and quiet: a peek that does not
// wait finds neither the engine's close (a read of 0 bytes) nor bytes nobody asked for.
// An engine closes idle connections after its own keep-alive timeout (uvicorn's is 5 s),
// and a request written to one would fail.
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
