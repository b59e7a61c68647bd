//go:build !linux

package rawtcp

import "syscall"

// supported: elsewhere a Conn is never made; net.Conn's own calls serve.
const supported = false

func read(uintptr, []byte) (int, syscall.Errno)  { return 0, syscall.ENOSYS }
func write(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }
func peek(uintptr, *byte) syscall.Errno          { return syscall.ENOSYS }
