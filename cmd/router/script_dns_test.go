package main

import (
	"net"
	"strconv"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/routerkit/router/runtime/discovery/dnstest"
)

// dnsServers holds each script's DNS server, started by "dns start".
var dnsServers sync.Map // *testscript.TestScript -> *dnstest.Server

// cmdDNS runs a DNS server on a loopback UDP port for the script, for engines_from_dns
// tests, and changes its records while the router runs:
//
//	dns start VAR                   start the server; VAR is set to its HOST:PORT
//	dns addrs NAME [IP...]          A/AAAA records of NAME (none: the name has no records)
//	dns srv NAME [TARGET:PORT...]   SRV records of NAME
//	dns servfail NAME               answer SERVFAIL for NAME
//	dns silence NAME                never answer for NAME (lookups time out)
//	dns answer NAME                 answer NAME from its records again
//	dns delete NAME                 answer NXDOMAIN for NAME
func cmdDNS(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: dns start VAR | dns addrs|srv|servfail|silence|answer|delete NAME [...]")
	}
	if args[0] == "start" {
		srv, err := dnstest.Start()
		ts.Check(err)
		dnsServers.Store(ts, srv)
		ts.Defer(func() { dnsServers.Delete(ts); _ = srv.Close() })
		ts.Setenv(args[1], srv.Addr())
		return
	}
	v, ok := dnsServers.Load(ts)
	if !ok {
		ts.Fatalf("dns: no server: run dns start VAR first")
	}
	srv := v.(*dnstest.Server)
	name, rest := args[1], args[2:]
	switch args[0] {
	case "addrs":
		srv.SetAddrs(name, rest...)
	case "srv":
		var srvs []dnstest.SRV
		for _, r := range rest {
			host, port, err := net.SplitHostPort(r)
			ts.Check(err)
			n, err := strconv.ParseUint(port, 10, 16)
			ts.Check(err)
			srvs = append(srvs, dnstest.SRV{Target: host, Port: uint16(n)})
		}
		srv.SetSRV(name, srvs...)
	case "servfail":
		srv.ServFail(name)
	case "silence":
		srv.Silence(name)
	case "answer":
		srv.Answer(name)
	case "delete":
		srv.Delete(name)
	default:
		ts.Fatalf("dns: unknown subcommand %q", args[0])
	}
}
