//go:build !unix

package upstream

import "net"

// peeker cannot peek without blocking here: an idle connection the engine closed fails
// the request written to it.
type peeker struct{}

func (*peeker) init(net.Conn) {}

func (*peeker) alive() bool { return true }
