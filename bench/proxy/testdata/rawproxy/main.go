// Command rawproxy is a measurement aid for docs/benchmarks.md ("Per-request CPU with
// Qwen3"), not a server to deploy: a round-robin proxy over pooled engine connections
// that reads and answers its clients without net/http's server (no per-connection
// serve loop, no background read, no deadlines, no limits), so that what net/http's
// server costs per request can be measured beside the bare proxy. -bgread and
// -deadlines add back, one at a time, the two things net/http's server does per request
// that a hostile-safe server needs too: a read pending on the client's connection while
// the handler runs (how a server notices a client that left) and the read deadlines of
// ReadHeaderTimeout and IdleTimeout. It lives under testdata so that ./... leaves it out:
//
//	go run ./bench/proxy/testdata/rawproxy -listen 127.0.0.1:43007 -upstreams HOST:PORT,...
package main

import (
	"bufio"
	"flag"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type upConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

var (
	mu   sync.Mutex
	idle = map[string][]*upConn{}
)

func get(addr string) (*upConn, error) {
	mu.Lock()
	if l := idle[addr]; len(l) > 0 {
		c := l[len(l)-1]
		idle[addr] = l[:len(l)-1]
		mu.Unlock()
		return c, nil
	}
	mu.Unlock()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &upConn{c: c, br: bufio.NewReaderSize(c, 4096), bw: bufio.NewWriterSize(c, 4096)}, nil
}

func put(addr string, c *upConn) { mu.Lock(); idle[addr] = append(idle[addr], c); mu.Unlock() }

func main() {
	listen := flag.String("listen", "", "")
	ups := flag.String("upstreams", "", "")
	bgRead := flag.Bool("bgread", false, "emulate net/http's background read per request")
	deadlines := flag.Bool("deadlines", false, "emulate net/http's header and idle read deadlines per request")
	flag.Parse()
	engines := strings.Split(*ups, ",")
	var rr atomic.Uint64
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		panic(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			panic(err)
		}
		go func() {
			defer c.Close()
			br, bw := bufio.NewReaderSize(c, 4096), bufio.NewWriterSize(c, 4096)
			for {
				if *deadlines {
					if _, err := br.Peek(1); err != nil {
						return
					}
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
				}
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if *deadlines {
					c.SetReadDeadline(time.Time{})
				}
				body, err := io.ReadAll(req.Body)
				if err != nil {
					return
				}
				var bg chan struct{}
				if *bgRead && br.Buffered() == 0 {
					bg = make(chan struct{})
					go func() {
						var b [1]byte
						c.Read(b[:]) // a pipelined byte would be lost: measurement only
						close(bg)
					}()
				}
				addr := engines[rr.Add(1)%uint64(len(engines))]
				u, err := get(addr)
				if err != nil {
					return
				}
				u.bw.WriteString(req.Method + " " + req.RequestURI + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
				u.bw.Write(body)
				if u.bw.Flush() != nil {
					return
				}
				resp, err := http.ReadResponse(u.br, nil)
				if err != nil {
					return
				}
				rb, err := io.ReadAll(resp.Body)
				if err != nil {
					return
				}
				put(addr, u)
				bw.WriteString("HTTP/1.1 " + strconv.Itoa(resp.StatusCode) + " OK\r\nContent-Type: " + resp.Header.Get("Content-Type") + "\r\nContent-Length: " + strconv.Itoa(len(rb)) + "\r\n\r\n")
				bw.Write(rb)
				if bw.Flush() != nil {
					return
				}
				if bg != nil {
					c.SetReadDeadline(time.Unix(1, 0))
					<-bg
					c.SetReadDeadline(time.Time{})
				}
				if *deadlines {
					c.SetReadDeadline(time.Now().Add(120 * time.Second))
				}
			}
		}()
	}
}
