package rawtcp

import (
	"syscall"
	"unsafe"
)

// supported: this system has the raw calls.
const supported = true

// peek is recvfrom(fd, b, 1, MSG_PEEK|MSG_DONTWAIT)'s error.
func peek(fd uintptr, b *byte) syscall.Errno {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(b)), 1, syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return errno
}
