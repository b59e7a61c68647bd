//go:build linux

package monitor

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/routerkit/router/internal/wait"
	"github.com/routerkit/router/runtime/plan"
)

// parseShard is a shard's parse without its epoll instance.
func parseShard(data []byte, eof bool) (body []byte, closes, complete bool, err error) {
	s := &shard{}
	s.br = bufio.NewReaderSize(&s.rd, 4096)
	se := &shardEngine{loadURL: "http://e/v1/loads", stage: stageLoad}
	return s.parse(se, data, eof)
}

// readReference reads an answer from the whole of data as connFetcher does.
func readReference(data []byte) ([]byte, bool, error) {
	br := bufio.NewReaderSize(bytes.NewReader(data), 4096)
	h, err := readHead(br)
	if err != nil {
		return nil, false, err
	}
	var buf bytes.Buffer
	var gz *gzip.Reader
	body, err := readAnswer(br, h, &buf, &gz, "http://e/v1/loads")
	return body, h.close, err
}

// FuzzShardParse holds a shard's reading of an answer that arrives in two parts to
// connFetcher's reading of the whole: once a prefix is complete its body is the
// reference's, and the whole with the connection closed reads as the reference does.
func FuzzShardParse(f *testing.F) {
	var gzipped bytes.Buffer
	zw := gzip.NewWriter(&gzipped)
	io.WriteString(zw, `{"loads": []}`)
	zw.Close()
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{\"loads\": []}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"loa\r\n8\r\nds\": []}\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\nuntil close",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA",
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: " + itoa(gzipped.Len()) + "\r\n\r\n" + gzipped.String(),
		"garbage\r\n\r\n",
	} {
		f.Add([]byte(s), uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		if len(data) > 1<<16 {
			return
		}
		want, _, wantErr := readReference(data)
		k := int(split) % (len(data) + 1)
		body, _, complete, err := parseShard(data[:k], false)
		if complete && err == nil && (wantErr != nil || !bytes.Equal(body, want)) {
			t.Fatalf("prefix %d read %q, the whole %q (%v)", k, body, want, wantErr)
		}
		body, _, complete, err = parseShard(data, true)
		if !complete {
			t.Fatal("an answer with the connection closed must be complete")
		}
		if (err == nil) != (wantErr == nil) || err == nil && !bytes.Equal(body, want) {
			t.Fatalf("read %q (%v), the reference %q (%v)", body, err, want, wantErr)
		}
	})
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

// rawEngine listens on loopback and answers each connection with serve; it counts the
// connections it accepted.
func rawEngine(t *testing.T, serve func(c net.Conn)) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &conns
}

// answerEach reads requests from c and writes answer after each.
func answerEach(answer string) func(c net.Conn) {
	return func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

const okLoads = "HTTP/1.1 200 OK\r\nContent-Length: 59\r\n\r\n" + `{"loads": [{"num_running_reqs": 1, "num_waiting_reqs": 0}]}`

// TestShardHostilePeers: engines that never answer, answer slowly, close after each
// request, answer garbage, or send an endless answer each fail their own polls in a
// shard, and an engine beside them is polled on time throughout.
func TestShardHostilePeers(t *testing.T) {
	good, _ := rawEngine(t, answerEach(okLoads))
	silent, _ := rawEngine(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	slow, _ := rawEngine(t, func(c net.Conn) {
		time.Sleep(300 * time.Millisecond)
		answerEach(okLoads)(c)
	})
	closing, closingConns := rawEngine(t, func(c net.Conn) {
		bufio.NewReader(c).ReadString('\n')
	})
	garbage, _ := rawEngine(t, answerEach("garbage\r\n\r\n"))
	var sent atomic.Int64
	endless, _ := rawEngine(t, func(c net.Conn) {
		bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		chunk := []byte("10000\r\n" + strings.Repeat("x", 1<<16) + "\r\n")
		var n int64
		for {
			k, err := c.Write(chunk)
			n += int64(k)
			if err != nil {
				break
			}
		}
		for { // the most any one connection carried
			most := sent.Load()
			if n <= most || sent.CompareAndSwap(most, n) {
				return
			}
		}
	})
	h := plan.Health{IntervalMS: 20, TimeoutMS: 100, FailureThreshold: 1, SuccessThreshold: 1}
	var engines []plan.Engine
	for i, u := range []string{good, silent, slow, closing, garbage, endless} {
		e := pollEvery5ms(string(rune('A'+i)), u)
		e.Load.IntervalMS, e.Load.StaleAfterMS = 100, 100
		engines = append(engines, e)
	}
	_, m := newSetMonitor(t, h, engines, engines)
	run(t, m)
	if !wait.Until(func() bool {
		st := m.Status()
		// A shard fails a poll past its deadline with context's error, a loop with the
		// connection's timeout.
		b := st["B"].LoadError
		return (strings.Contains(b, "deadline exceeded") || strings.Contains(b, "i/o timeout")) &&
			st["C"].LoadError != "" && closingConns.Load() >= 3 &&
			strings.Contains(st["E"].LoadError, "malformed HTTP version") &&
			st["F"].LoadError != "" // too large, or past its deadline on a slow machine
	}) {
		t.Fatalf("not every hostile engine failing after %v: %+v (%d connections to the closing one)", wait.Timeout, m.Status(), closingConns.Load())
	}
	if want := shardCount(); shards(m) != want {
		t.Fatalf("%d shards, want %d", shards(m), want)
	}
	// The good engine was polled on time meanwhile: its report is never older than a
	// few intervals.
	for range 20 {
		st := m.Status()["A"]
		if time.Since(st.LastLoadAt) > time.Second {
			t.Fatalf("the good engine fell behind: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The endless answer was cut at the body bound (and what the sockets' buffers hold),
	// not read to the end of memory.
	if n := sent.Load(); n == 0 || n > 2*(maxBody+maxHeadBytes) {
		t.Errorf("the endless engine sent up to %d bytes on one connection before the shard stopped reading", n)
	}
}

// shards returns how many shards m runs.
func shards(m *Monitor) int {
	m.setMu.Lock()
	defer m.setMu.Unlock()
	return len(m.shards)
}

// shardCount is how many shards a monitor of a few plain-HTTP engines runs: one, or none
// when ROUTER_MONITOR_SHARDS=off (make test runs the package's tests both ways).
func shardCount() int {
	if shardsOff {
		return 0
	}
	return 1
}

// TestShardSwitch: ROUTER_MONITOR_SHARDS=off polls each engine in a loop of its own, and
// both ways poll the engine.
func TestShardSwitch(t *testing.T) {
	was := shardsOff
	t.Cleanup(func() { shardsOff = was })
	for _, off := range []bool{false, true} {
		shardsOff = off
		good, _ := rawEngine(t, answerEach(okLoads))
		h := plan.Health{IntervalMS: 20, TimeoutMS: 1000, FailureThreshold: 1, SuccessThreshold: 1}
		e := pollEvery5ms("A", good)
		_, m := newSetMonitor(t, h, []plan.Engine{e}, []plan.Engine{e})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		wait.For(t, "the engine polled", func() bool { return !m.Status()["A"].LastLoadAt.IsZero() })
		if want := map[bool]int{false: 1, true: 0}[off]; shards(m) != want {
			t.Errorf("off=%v: %d shards, want %d", off, shards(m), want)
		}
		cancel()
		<-done
	}
}

// TestShardDeclaredLengthNoAllocation: an answer that declares a long body (under the
// bound) and sends a few bytes of it costs the shard what arrived, not what was
// declared.
func TestShardDeclaredLengthNoAllocation(t *testing.T) {
	data := []byte("HTTP/1.1 200 OK\r\nContent-Length: " + itoa(maxBody) + "\r\n\r\n{\"loads\"")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, _, complete, err := parseShard(data, false); complete || err != nil {
			t.Fatalf("a partial answer read as complete=%v, %v", complete, err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 10*(64<<10) {
		t.Errorf("10 partial answers declaring %d bytes allocated %d bytes", maxBody, n)
	}
}

// TestShardAddRemoveUnderLoad: engines added and removed while a shard polls many leave
// no loop behind and stop being polled once SetEngines returns.
func TestShardAddRemoveUnderLoad(t *testing.T) {
	h := plan.Health{IntervalMS: 5, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 1}
	var all []plan.Engine
	var fakes []*fakeEngine
	for i := range 40 {
		f, u := newFake(t, 200)
		fakes = append(fakes, f)
		all = append(all, pollEvery5ms("E"+itoa(i), u))
	}
	_, m := newSetMonitor(t, h, all[:20], all)
	run(t, m)
	for round := range 10 {
		set := all[round%2*20 : round%2*20+20]
		m.SetEngines(set)
		gone := make([]int32, len(all))
		for i, f := range fakes {
			gone[i] = f.polls()
		}
		wait.For(t, "the set polled", func() bool {
			st := m.Status()
			for _, e := range set {
				if st[e.ID].LastLoadAt.IsZero() {
					return false
				}
			}
			return len(st) == len(set)
		})
		for i, f := range fakes {
			in := i/20 == round%2
			if n := f.polls() - gone[i]; !in && n > 2 {
				t.Fatalf("round %d: removed engine %d polled %d times after SetEngines returned", round, i, n)
			}
		}
	}
}

// TestShardStopsDials: a dial that cannot finish (a blackholed address) does not hold
// Run's end.
func TestShardStopsDials(t *testing.T) {
	h := plan.Health{IntervalMS: 5, TimeoutMS: 1000, FailureThreshold: 3, SuccessThreshold: 1}
	e := pollEvery5ms("E1", "http://10.255.255.1:9")
	_, m := newSetMonitor(t, h, []plan.Engine{e}, []plan.Engine{e})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(wait.Timeout):
		t.Fatal("Run did not return while a dial was in flight")
	}
}
