//go:build linux && race

package rawtcp

import (
	"errors"
	"syscall"
)

// Under the race detector the reads and writes are syscall.Read and syscall.Write: their
// annotations (a write releases, a read acquires) are how the detector sees that what a
// peer in the same process wrote before sending happened before what the reader does
// after, as it sees it through net.Conn. Raw calls would report races between a test's
// client and the server it talks to. Everything else of a Conn is the same.

func read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return n, errnoOf(err)
}

func write(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return n, errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if err != nil && !errors.As(err, &errno) {
		return syscall.EIO
	}
	return errno
}
