//go:build unix

package rawtcp

import "syscall"

// Quiet reports whether a peek at the socket fd that does not wait finds it open with
// nothing to read (EAGAIN): neither the peer's close nor bytes nobody asked for.
func Quiet(fd uintptr) bool {
	var b [1]byte
	if Off || !supported {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	}
	return peek(fd, &b[0]) == syscall.EAGAIN
}
