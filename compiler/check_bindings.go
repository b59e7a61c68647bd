package compiler

import (
	"net"
	"strconv"

	"github.com/routerkit/router/runtime/plan"
)

// checkBindings checks the shared binding store: a Redis store needs an address the
// router can dial, and a memory store has nothing to dial, so an address there is a
// mistake rather than something to ignore.
func (c *checker) checkBindings() {
	b := c.p.Bindings
	if b == nil {
		return
	}
	switch b.Store {
	case plan.BindingsRedis:
		if b.Address == "" {
			c.at(sel("bindings", "store"), "bindings.store \"redis\" needs bindings.address: the Redis server's HOST:PORT, e.g. \"127.0.0.1:6379\"")
			return
		}
		host, port, err := net.SplitHostPort(b.Address)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n <= 0 || n > 65535 {
			c.at(sel("bindings", "address"), "bindings.address %q is not a HOST:PORT address with a port from 1 to 65535, e.g. \"127.0.0.1:6379\"", b.Address)
		}
	case plan.BindingsMemory:
		if b.Address != "" {
			c.at(sel("bindings", "address"), "bindings.address is only used with store \"redis\": set store: \"redis\" or remove the address")
		}
	}
}
