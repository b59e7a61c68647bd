//go:build linux

package main

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// floorEnv names the environment variable that makes this program the floor poller: a
// child that reads engine URLs from its standard input, one a line, and polls them.
const floorEnv = "BENCH_POLLING_FLOOR"

// floorChild is the cheapest poller this program knows how to write: one locked OS
// thread, non-blocking sockets in one epoll instance, and per engine each interval one
// write of the router's request and the reads of what arrives, parsed no further than
// that. Its system calls are raw ones, which Go's sysmon does not watch (a
// thread blocked in a counted one has sysmon waking every 20 µs to look at it). It has
// no timers, goroutines, deadlines or state publication, so
// its CPU is what the kernel's loopback TCP costs per poll: the floor under any poller
// of the router's. With gather > 0 it reads in the router's shards' shape: not as
// answers arrive, but gather after a slot's writes and at the next slot, all that
// arrived at once.
func floorChild(interval, gather time.Duration) error {
	runtime.GOMAXPROCS(1)
	runtime.LockOSThread()
	var urls []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			urls = append(urls, s)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	fds := make([]int, len(urls))
	reqs := make([][]byte, len(urls))
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return err
		}
		fd, err := dialTCP4(u.Host)
		if err != nil {
			return fmt.Errorf("dialling %s: %w", u.Host, err)
		}
		fds[i] = fd
		reqs[i] = []byte("GET /v1/loads HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: router-monitor\r\nAccept: */*\r\nAccept-Encoding: gzip\r\n\r\n")
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(i)}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	fmt.Println("ready")
	// Engine i is due at i/n of the interval, written in 20 ms slots as the router's
	// pollers wake (schedule.go).
	const slot = 20 * time.Millisecond
	slots := int(interval / slot)
	buf := make([]byte, 64<<10)
	events := make([]syscall.EpollEvent, 256)
	start := time.Now()
	for k := 0; ; k++ {
		s := k % slots
		for i := s * len(fds) / slots; i < (s+1)*len(fds)/slots; i++ {
			if _, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fds[i]), uintptr(unsafe.Pointer(&reqs[i][0])), uintptr(len(reqs[i]))); e != 0 {
				return fmt.Errorf("write: %w", e)
			}
		}
		end := start.Add(time.Duration(k+1) * slot)
		if gather > 0 {
			rawSleep(gather)
			if err := floorRead(epfd, fds, events, buf, 0); err != nil {
				return err
			}
			rawSleep(time.Until(end))
			if err := floorRead(epfd, fds, events, buf, 0); err != nil {
				return err
			}
			continue
		}
		for {
			wait := time.Until(end)
			if wait <= 0 {
				break
			}
			if err := floorRead(epfd, fds, events, buf, int(wait/time.Millisecond)+1); err != nil {
				return err
			}
		}
	}
}

// rawSleep sleeps d in a raw system call, which neither the scheduler nor sysmon sees.
func rawSleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// floorRead waits up to timeout milliseconds for epfd's events and reads each ready
// socket once.
func floorRead(epfd int, fds []int, events []syscall.EpollEvent, buf []byte, timeout int) error {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(timeout), 0, 0)
	if e == syscall.EINTR {
		return nil
	}
	if e != 0 {
		return fmt.Errorf("epoll_pwait: %w", e)
	}
	for _, ev := range events[:n] {
		if _, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fds[ev.Fd]), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf))); e != 0 && e != syscall.EAGAIN {
			return fmt.Errorf("read: %w", e)
		}
	}
	return nil
}

// dialTCP4 connects a blocking socket to host:port (an IPv4 literal, as the simulator
// listens) and makes it non-blocking once connected.
func dialTCP4(hostport string) (int, error) {
	var a [4]byte
	var port int
	if _, err := fmt.Sscanf(strings.Replace(hostport, ":", " ", 1), "%d.%d.%d.%d %d", &a[0], &a[1], &a[2], &a[3], &port); err != nil {
		return -1, fmt.Errorf("not an IPv4 address and port: %q", hostport)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: port, Addr: a}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, syscall.SetNonblock(fd, true)
}
