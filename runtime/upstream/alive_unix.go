//go:build unix

package upstream

import (
	"net"
	"syscall"

	"github.com/routerkit/router/runtime/rawtcp"
)

// peeker tells whether an idle connection is still open and quiet: a peek that does not
// wait finds neither the engine's close (a read of 0 bytes) nor bytes nobody asked for.
// An engine closes idle connections after its own keep-alive timeout (uvicorn's is 5 s),
// and a request written to one would fail. It is made once per connection, so that the
// peek of a connection taken from the pool allocates nothing.
type peeker struct {
	raw  syscall.RawConn // nil: the connection has no descriptor to peek at
	err  error           // from asking the connection for its descriptor
	open bool
	peek func(fd uintptr) bool
}

// init readies the peeker of c.
func (p *peeker) init(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	p.raw, p.err = sc.SyscallConn()
	p.peek = func(fd uintptr) bool {
		p.open = rawtcp.Quiet(fd)
		return true
	}
}

// alive reports whether the connection is still open and quiet.
func (p *peeker) alive() bool {
	if p.err != nil {
		return false
	}
	if p.raw == nil {
		return true
	}
	p.open = false
	err := p.raw.Read(p.peek)
	return err == nil && p.open
}
