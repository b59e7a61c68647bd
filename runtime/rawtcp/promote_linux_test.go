package rawtcp

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"
)

// TestNoNetCallsPromoted: a Conn offers none of the TCPConn's own copy paths (ReadFrom,
// WriteTo, and net.Buffers' writev, found by the same promotion), which would make net's
// calls and wake sysmon; net.Buffers written to it arrive whole, a raw write per part.
func TestNoNetCallsPromoted(t *testing.T) {
	c, peer := pair(t, true)
	if _, ok := c.(io.ReaderFrom); ok {
		t.Error("a Conn is an io.ReaderFrom: io.Copy into it would make net's writes")
	}
	if _, ok := c.(io.WriterTo); ok {
		t.Error("a Conn is an io.WriterTo: io.Copy from it would make net's reads")
	}
	if _, ok := c.(syscall.Conn); !ok {
		t.Error("a Conn is not a syscall.Conn: upstream's peek needs its descriptor")
	}
	head, body := []byte("head:"), bytes.Repeat([]byte("b"), 1<<20)
	bufs := net.Buffers{head, body}
	done := make(chan []byte)
	go func() {
		got, _ := io.ReadAll(io.LimitReader(peer, int64(len(head)+len(body))))
		done <- got
	}()
	if n, err := bufs.WriteTo(c); err != nil || n != int64(len(head)+len(body)) {
		t.Fatalf("net.Buffers wrote %d bytes, %v", n, err)
	}
	if got := <-done; !bytes.Equal(got, append(head, body...)) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(got), len(head)+len(body))
	}
}
