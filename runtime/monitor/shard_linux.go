//go:build linux

package monitor

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/routerkit/router/runtime/plan"
)

// shard polls up to shardSize plain-HTTP engines from one goroutine over an epoll
// instance of its own, level-triggered, watching the engines' sockets (dialled with
// net.Dialer, then taken out of Go's poller). At each wake it writes the requests that
// are due, one write each, reads each socket that epoll reports ready, and parses the
// answers as connFetcher does. A goroutine, a timer and a connection of its own per
// engine cost a park and a wake-up of the goroutine, a timer and an empty read per
// poll: the scheduler's share was a fifth of what polling 2048 engines cost
// (docs/benchmarks.md, "Fleet polling"). Each poll keeps its own deadline, so an engine
// that is slow or silent delays no other: the shard goes on serving the rest while it
// waits.
type shard struct {
	m      *Monitor
	epfd   int
	ep     *os.File // epfd in Go's poller
	raw    syscall.RawConn
	wakefd int // an eventfd in epfd: commands wait in cmds, or a dial finished

	mu    sync.Mutex
	cmds  []shardCmd
	dials []dialResult
	size  int // engines assigned, counted by the caller under Monitor.setMu

	engines []*shardEngine // walked at each step: a slice walks several times faster than a map
	byFD    map[int32]*shardEngine
	next    time.Time // when step is next due: the first wake or deadline of an engine
	events  []syscall.EpollEvent
	scratch []byte
	rd      bytes.Reader
	br      *bufio.Reader
	buf     bytes.Buffer
	gz      *gzip.Reader
	done    chan struct{}
	dialWG  sync.WaitGroup // dials in flight, which write to wakefd
}

// shardCmd adds an engine, removes one (done is closed once nothing of it runs), or
// stops the shard (e nil).
type shardCmd struct {
	add  bool
	e    *shardEngine
	done chan struct{}
}

type dialResult struct {
	e   *shardEngine
	fd  int
	err error
}

// shardEngine is one engine of a shard: its schedule and the poll in flight.
type shardEngine struct {
	e          plan.Engine
	loadURL    string // the polls' URLs, for error messages (made once: readAnswer takes one per poll)
	healthURL  string
	addr       string
	sched      *schedule
	slot       time.Duration
	stamps     map[int]string
	reqLoad    []byte
	reqHealth  []byte
	fd         int // -1: not connected
	reused     bool
	dialing    bool
	removed    bool
	index      int // in shard.engines
	stage      int // what is in flight: stageIdle, stageLoad or stageHealth
	polledAt   time.Time
	wakeAt     time.Time
	deadline   time.Time
	counts     bool // the load poll of this wake counts as a health check
	retried    bool
	pending    []byte // an answer's bytes so far, when it came in more than one read
	need       int    // bytes pending must reach before it is worth parsing again
	chunked    bool   // the answer in pending is chunked
	dialCancel context.CancelFunc
}

const (
	stageIdle = iota
	stageLoad
	stageHealth
)

// newShard makes a shard's epoll instance and starts its goroutine.
func newShard(m *Monitor) (*shard, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	r, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		syscall.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", errno)
	}
	wakefd := int(r)
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(wakefd)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		syscall.Close(epfd)
		syscall.Close(wakefd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		syscall.Close(wakefd)
		return nil, fmt.Errorf("epoll instance: %w", err)
	}
	ep := os.NewFile(uintptr(epfd), "epoll")
	raw, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		syscall.Close(wakefd)
		return nil, fmt.Errorf("epoll instance: %w", err)
	}
	s := &shard{
		m: m, epfd: epfd, ep: ep, raw: raw, wakefd: wakefd,
		byFD:   map[int32]*shardEngine{},
		events: make([]syscall.EpollEvent, 256), scratch: make([]byte, 64<<10),
		done: make(chan struct{}),
	}
	s.br = bufio.NewReaderSize(&s.rd, 4096)
	go s.run()
	return s, nil
}

// wake makes the shard's epoll_wait return.
func (s *shard) wake() {
	one := [8]byte{1}
	_, _ = syscall.Write(s.wakefd, one[:])
}

func (s *shard) send(c shardCmd) {
	s.mu.Lock()
	s.cmds = append(s.cmds, c)
	s.mu.Unlock()
	s.wake()
}

// add starts polling e; the returned function stops it and returns once nothing of it
// runs.
func (s *shard) add(e plan.Engine, u *url.URL) func() {
	var loadEvery time.Duration
	if e.Load.Source != "none" {
		loadEvery = time.Duration(e.Load.IntervalMS) * time.Millisecond
	}
	healthEvery := time.Duration(s.m.health.IntervalMS) * time.Millisecond
	se := &shardEngine{
		e: e, healthURL: e.URL + "/health", addr: dialAddr(u), fd: -1,
		sched: newSchedule(loadEvery, healthEvery, s.m.rnd), slot: wakeSlot(loadEvery, healthEvery),
		stamps: map[int]string{}, reqHealth: request("/health", u.Host),
	}
	if loadEvery > 0 {
		path := loadPaths[e.Load.Source]
		se.reqLoad = request(path, u.Host)
		se.loadURL = e.URL + path
	}
	s.send(shardCmd{add: true, e: se})
	return func() {
		done := make(chan struct{})
		s.send(shardCmd{e: se, done: done})
		<-done
	}
}

// stop ends the shard's goroutine and waits for it. Its engines are removed first.
func (s *shard) stop() {
	s.send(shardCmd{})
	<-s.done
}

// run is the shard's goroutine. It waits for its epoll instance in Go's poller, not in
// a blocking epoll_wait: a thread blocked in a system call has its processor taken by
// sysmon, which then keeps waking every 20 µs, and that cost more than the shard saved.
// The wait's deadline is the shard's one timer, set to the next slot or poll deadline.
func (s *shard) run() {
	defer close(s.done)
	defer s.closeAll()
	var set time.Time
	for {
		if now := time.Now(); !now.Before(s.next) {
			// Answers that came in while the shard waited are read before any poll is
			// failed for its deadline: a shard woken late must not fail what arrived.
			n, _ := pollNow(s.epfd, s.events)
			if !s.ready(n) {
				return
			}
			s.next = time.Now().Add(time.Hour)
			s.step(time.Now())
		}
		if !s.next.Equal(set) {
			_ = s.ep.SetReadDeadline(s.next)
			set = s.next
		}
		n := 0
		err := s.raw.Read(func(fd uintptr) bool {
			n, _ = pollNow(int(fd), s.events)
			return n > 0
		})
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			s.m.log.Error("monitor shard: waiting for its epoll instance failed", "error", err)
			return
		}
		if !s.ready(n) {
			return
		}
	}
}

// ready handles the first n events of s.events. It reports false when the shard is to
// stop.
func (s *shard) ready(n int) bool {
	for i := range max(n, 0) {
		ev := s.events[i]
		if int(ev.Fd) == s.wakefd {
			if !s.commands() {
				return false
			}
			continue
		}
		if se := s.byFD[ev.Fd]; se != nil {
			s.readable(se, time.Now())
		}
	}
	return true
}

// commands applies what add, remove and stop sent, and the dials that finished. It
// reports false when the shard is to stop.
func (s *shard) commands() bool {
	var b [8]byte
	_, _ = syscall.Read(s.wakefd, b[:])
	s.mu.Lock()
	cmds, dials := s.cmds, s.dials
	s.cmds, s.dials = nil, nil
	s.mu.Unlock()
	for _, d := range dials {
		s.dialed(d)
	}
	for _, c := range cmds {
		switch {
		case c.e == nil:
			return false
		case c.add:
			c.e.sched.start(s.m.now())
			c.e.wakeAt = alignUp(c.e.sched.wake(), c.e.slot)
			s.at(c.e.wakeAt)
			c.e.index = len(s.engines)
			s.engines = append(s.engines, c.e)
		default:
			s.drop(c.e)
			last := s.engines[len(s.engines)-1]
			s.engines[c.e.index], last.index = last, c.e.index
			s.engines[len(s.engines)-1] = nil
			s.engines = s.engines[:len(s.engines)-1]
			c.e.removed = true
			close(c.done)
		}
	}
	return true
}

// step starts the polls that are due and fails those past their deadline. It runs when
// the shard's next is reached, not at every event, so a shard's polls cost no walk of
// its engines each.
func (s *shard) step(now time.Time) {
	for _, se := range s.engines {
		switch se.stage {
		case stageIdle:
			if !now.Before(se.wakeAt) {
				s.begin(se, now)
			}
		default:
			if !now.Before(se.deadline) {
				s.failed(se, now, fmt.Errorf("GET %s: %w", se.current(), context.DeadlineExceeded))
			}
		}
		if se.stage == stageIdle {
			s.at(se.wakeAt)
		} else {
			s.at(se.deadline)
		}
	}
}

// at moves the shard's next step to t if t is sooner.
func (s *shard) at(t time.Time) {
	if t.Before(s.next) {
		s.next = t
	}
}

// current is the URL of the poll in flight.
func (se *shardEngine) current() string {
	if se.stage == stageHealth {
		return se.healthURL
	}
	return se.loadURL
}

// begin starts what is due of se at now: its load poll, or else its probe.
func (s *shard) begin(se *shardEngine, now time.Time) {
	se.polledAt, se.counts = now, false
	switch {
	case se.sched.loadDue(now):
		s.request(se, stageLoad, loadTimeout(se.e))
	case se.sched.probeDue(now):
		s.request(se, stageHealth, time.Duration(s.m.health.TimeoutMS)*time.Millisecond)
	default:
		se.wakeAt = alignUp(se.sched.wake(), se.slot)
		s.at(se.wakeAt)
	}
}

// request sends the request of stage, dialling first when se has no connection.
func (s *shard) request(se *shardEngine, stage int, timeout time.Duration) {
	se.stage, se.deadline, se.retried = stage, time.Now().Add(timeout), false
	s.at(se.deadline)
	se.pending, se.need, se.chunked = se.pending[:0], 0, false
	if se.fd < 0 {
		s.dial(se)
		return
	}
	s.write(se)
}

func (s *shard) write(se *shardEngine) {
	req := se.reqHealth
	if se.stage == stageLoad {
		req = se.reqLoad
	}
	n, err := rawWrite(se.fd, req)
	if err == nil && n < len(req) {
		err = io.ErrShortWrite // a fresh request on an idle connection fits its send buffer
	}
	if err != nil {
		if se.reused && !se.retried && connLost(err) {
			s.retry(se)
			return
		}
		s.failed(se, time.Now(), fmt.Errorf("GET %s: %w", se.current(), err))
	}
}

// retry sends the request again on a new connection: the engine closed the idle one as
// the request went out (uvicorn closes idle ones after 5 s), as connFetcher does.
func (s *shard) retry(se *shardEngine) {
	s.drop(se)
	se.retried = true
	se.pending, se.need, se.chunked = se.pending[:0], 0, false
	s.dial(se)
}

// dial connects se in a goroutine of its own (a dial may wait for its timeout), which
// hands the socket to the shard.
func (s *shard) dial(se *shardEngine) {
	se.dialing = true
	ctx, cancel := context.WithDeadline(context.Background(), se.deadline)
	se.dialCancel = cancel
	d := net.Dialer{Timeout: s.m.connectTimeout, KeepAlive: 30 * time.Second}
	s.dialWG.Go(func() {
		defer cancel()
		fd, err := dialFD(ctx, &d, se.addr)
		s.mu.Lock()
		s.dials = append(s.dials, dialResult{e: se, fd: fd, err: err})
		s.mu.Unlock()
		s.wake()
	})
}

// dialFD dials addr and returns a duplicate of the connection's socket, non-blocking
// and out of Go's poller: closing the net.Conn removes the socket from the runtime's
// epoll, and the duplicate keeps the connection open.
func dialFD(ctx context.Context, d *net.Dialer, addr string) (int, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return -1, err
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := raw.Control(func(s uintptr) {
		r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if errno != 0 {
			derr = errno
			return
		}
		fd = int(r)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("dup: %w", derr)
	}
	return fd, nil
}

// dialed takes the socket a dial returned.
func (s *shard) dialed(d dialResult) {
	se := d.e
	if se.removed || !se.dialing {
		if d.fd >= 0 {
			syscall.Close(d.fd)
		}
		return
	}
	se.dialing, se.dialCancel = false, nil
	if d.err != nil {
		s.failed(se, time.Now(), fmt.Errorf("GET %s: %w", se.current(), d.err))
		return
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(d.fd)}
	if err := syscall.EpollCtl(s.epfd, syscall.EPOLL_CTL_ADD, d.fd, &ev); err != nil {
		syscall.Close(d.fd)
		s.failed(se, time.Now(), fmt.Errorf("GET %s: epoll_ctl: %w", se.current(), err))
		return
	}
	se.fd, se.reused = d.fd, false
	s.byFD[int32(d.fd)] = se
	s.write(se)
}

// drop closes se's connection.
func (s *shard) drop(se *shardEngine) {
	if se.fd >= 0 {
		_ = syscall.EpollCtl(s.epfd, syscall.EPOLL_CTL_DEL, se.fd, nil)
		delete(s.byFD, int32(se.fd))
		syscall.Close(se.fd)
		se.fd = -1
	}
	se.dialing = false
	if se.dialCancel != nil {
		se.dialCancel()
		se.dialCancel = nil
	}
	if cap(se.pending) > 4096 {
		se.pending = nil
	}
}

// readable reads what se's socket holds and, once the answer is whole, applies it.
func (s *shard) readable(se *shardEngine, now time.Time) {
	eof := false
	var data []byte
	// A few reads at most per event: a long answer is read over several, level-triggered
	// epoll reporting the socket again, so other engines' answers are not held behind it.
	for range 4 {
		n, err := rawRead(se.fd, s.scratch)
		if err == syscall.EAGAIN {
			break
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			if se.stage == stageIdle {
				s.drop(se)
				return
			}
			if se.reused && !se.retried && len(se.pending) == 0 && len(data) == 0 && connLost(err) {
				s.retry(se)
				return
			}
			s.failed(se, now, fmt.Errorf("GET %s: %w", se.current(), err))
			return
		}
		if n == 0 {
			eof = true
			break
		}
		if se.stage == stageIdle {
			s.drop(se) // bytes no request asked for, or the engine closing an idle connection
			return
		}
		if data == nil && len(se.pending) == 0 && n < len(s.scratch) {
			data = s.scratch[:n] // the usual case: the whole answer in one read
			break
		}
		se.pending = append(se.pending, s.scratch[:n]...)
		if len(se.pending) > maxHeadBytes+maxBody {
			s.failed(se, now, errTooLarge)
			return
		}
	}
	if se.stage == stageIdle {
		if eof {
			s.drop(se)
		}
		return
	}
	if data == nil {
		data = se.pending
	}
	if eof && len(data) == 0 && se.reused && !se.retried {
		s.retry(se)
		return
	}
	if !eof && (len(data) < se.need || se.chunked && !bytes.HasSuffix(data, []byte("\n\r\n"))) {
		return // not whole yet: a chunked answer ends in an empty line after its last chunk
	}
	body, closes, complete, err := s.parse(se, data, eof)
	if !complete {
		if eof {
			s.failed(se, now, fmt.Errorf("GET %s: %w", se.current(), io.ErrUnexpectedEOF))
			return
		}
		if len(se.pending) == 0 {
			se.pending = append(se.pending, data...)
		}
		return
	}
	if err != nil {
		s.failed(se, now, err)
		return
	}
	if closes || eof {
		s.drop(se)
	} else {
		se.reused = true
		se.pending, se.need, se.chunked = se.pending[:0], 0, false
		if cap(se.pending) > keepBytes {
			se.pending = nil
		}
	}
	s.answered(se, body, nil)
}

// parse reads an answer from data, all that arrived so far (eof: and all there will
// be). complete is false while more bytes are needed to tell.
func (s *shard) parse(se *shardEngine, data []byte, eof bool) (body []byte, closes, complete bool, err error) {
	s.rd.Reset(data)
	s.br.Reset(&s.rd)
	unread := func() int { return s.rd.Len() + s.br.Buffered() }
	h, err := readHead(s.br)
	if err != nil {
		if !eof && ranOut(err) {
			return nil, false, false, nil
		}
		return nil, false, true, fmt.Errorf("GET %s: %w", se.current(), err)
	}
	if h.length > maxBody && !h.gzip && h.status/100 == 2 {
		return nil, false, true, errTooLarge // a declared length is never waited for
	}
	if h.length >= 0 && !h.chunked {
		if need := len(data) - unread() + int(h.length); len(data) < need && !eof {
			se.need = need
			return nil, false, false, nil
		}
	}
	se.chunked = h.chunked
	if h.length < 0 && !h.chunked && !eof {
		return nil, false, false, nil // the body ends where the connection does
	}
	body, err = readAnswer(s.br, h, &s.buf, &s.gz, se.current())
	if err != nil && !eof && ranOut(err) {
		return nil, false, false, nil
	}
	if err != nil {
		var status statusError
		if !errors.As(err, &status) {
			err = fmt.Errorf("GET %s: %w", se.current(), err)
		}
		return nil, false, true, err
	}
	// Bytes after the answer were not asked for: the connection goes with them.
	return body, h.close || unread() > 0, true, nil
}

// ranOut reports whether err is a read running out of the bytes that arrived so far.
func ranOut(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// failed ends se's poll in flight with err; its connection goes with it.
func (s *shard) failed(se *shardEngine, now time.Time, err error) {
	s.drop(se)
	s.answered(se, nil, err)
}

// answered applies the outcome of se's poll in flight as pollLoop does and starts the
// probe when it is due at the same wake.
func (s *shard) answered(se *shardEngine, body []byte, err error) {
	m, now, id := s.m, se.polledAt, se.e.ID
	stage := se.stage
	se.stage = stageIdle
	switch stage {
	case stageLoad:
		if err == nil {
			err = m.publishLoad(se.e, body, se.stamps)
		}
		m.recordLoad(id, err)
		se.counts = se.sched.loaded(now, err == nil)
		if err == nil {
			m.change(id)
		}
		if se.sched.probeDue(now) {
			s.request(se, stageHealth, time.Duration(m.health.TimeoutMS)*time.Millisecond)
			return
		}
		if se.counts {
			m.recordCheck(id, nil)
		}
	case stageHealth:
		se.sched.probed(now, err == nil)
		m.recordCheck(id, err)
	}
	se.wakeAt = alignUp(se.sched.wake(), se.slot)
	s.at(se.wakeAt)
}

// rawWrite, rawRead and pollNow are the shard's system calls on its non-blocking sockets
// and epoll instance, which return without waiting. They are made raw, without telling
// the scheduler that the thread enters a system call: that bookkeeping, and sysmon
// waking to look at threads in system calls, cost as much again as the router's own
// work per poll (perf, docs/benchmarks.md "Fleet polling", session 6).
func rawWrite(fd int, b []byte) (int, error) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func rawRead(fd int, b []byte) (int, error) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// pollNow returns the events that epfd holds now, into events.
func pollNow(epfd int, events []syscall.EpollEvent) (int, error) {
	n, _, errno := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func (s *shard) closeAll() {
	for _, se := range s.engines {
		s.drop(se) // cancels its dial
		se.removed = true
	}
	s.dialWG.Wait()
	s.mu.Lock()
	for _, c := range s.cmds {
		if c.done != nil {
			close(c.done)
		}
	}
	for _, d := range s.dials {
		if d.fd >= 0 {
			syscall.Close(d.fd)
		}
	}
	s.cmds, s.dials = nil, nil
	s.mu.Unlock()
	s.ep.Close()
	syscall.Close(s.wakefd)
}
