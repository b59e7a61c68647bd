package control

import (
	"net"
	"testing"
)

func TestLoopbackOnlyListeners(t *testing.T) {
	for addr, want := range map[net.Addr]bool{
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 30000}: true,
		&net.TCPAddr{IP: net.IPv4(127, 9, 8, 7), Port: 30000}: true,
		&net.TCPAddr{IP: net.IPv6loopback, Port: 30000}:       true,
		&net.UnixAddr{Name: "/run/router.sock", Net: "unix"}:  true,
		&net.TCPAddr{IP: net.IPv4zero, Port: 30000}:           false,
		&net.TCPAddr{IP: net.IPv6unspecified, Port: 30000}:    false,
		&net.TCPAddr{Port: 30000}:                             false,
		&net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 30000}:  false,
		&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 30000}: false,
	} {
		if got := LoopbackOnly(addr); got != want {
			t.Errorf("LoopbackOnly(%s %s) = %v, want %v", addr.Network(), addr, got, want)
		}
	}
}
