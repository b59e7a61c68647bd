package main

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdFreePort sets each named variable to a free TCP port on 127.0.0.1; the ports are
// consecutive, for commands that take a base port and count up from it:
//
//	freeport P1 P2
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: freeport VAR...")
	}
	for range 200 { // many tries: a machine just off a load test has ports in TIME_WAIT
		if base, ok := consecutivePorts(len(args)); ok {
			for i, name := range args {
				ts.Setenv(name, strconv.Itoa(base+i))
			}
			return
		}
	}
	ts.Fatalf("freeport: found no %d consecutive free ports", len(args))
}

// consecutivePorts picks n consecutive ports at random below Linux's ephemeral range
// (32768 and up) and checks they are free. Below that range no outgoing connection takes
// a port between this check and the server's bind, as one could take a port the kernel
// handed out for 127.0.0.1:0 on a machine busy with tests. The ports are released before
// it returns, so a caller can bind them.
func consecutivePorts(n int) (int, bool) {
	const low, high = 20000, 32700
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	base := low + rand.IntN(high-low-n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
		if err != nil {
			return 0, false
		}
		held = append(held, l)
	}
	return base, true
}

// cmdWaitFor polls a URL until it answers 2xx, for at most a minute, so a script can wait
// for a background server without sleeping. Servers are usually up in milliseconds; one
// loading a real tokenizer takes seconds, and tens of them race-enabled on a busy machine:
//
//	waitfor http://127.0.0.1:$P1/health
func cmdWaitFor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfor URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitForLimit)
	defer cancel()
	client := scriptClient(ts, args[0])
	var last error
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
		ts.Check(err)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return
			}
			last = &statusError{resp.Status}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	ts.Fatalf("waitfor %s: not ready after %v: %v", args[0], waitForLimit, last)
}

const waitForLimit = time.Minute

type statusError struct{ status string }

func (e *statusError) Error() string { return "status " + e.status }

// cmdEnvSubst expands $VAR and ${VAR} in files in place, for configs that need values
// only known at run time, such as ports from freeport:
//
//	envsubst fleet.cue
func cmdEnvSubst(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: envsubst FILE...")
	}
	for _, name := range args {
		data := os.Expand(ts.ReadFile(name), ts.Getenv)
		ts.Check(os.WriteFile(ts.MkAbs(name), []byte(data), 0o644))
	}
}

// cmdWaitMatch polls a URL until its body matches a regular expression, for at most a
// minute, so a script can wait for a state the router reaches on its own (an engine found
// in DNS, a drained one gone) without sleeping; with ! it waits until the body no longer
// matches:
//
//	waitmatch http://127.0.0.1:$R/admin/state '"id": *"pods:127\.0\.0\.1:'
func cmdWaitMatch(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: [!] waitmatch URL REGEXP")
	}
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), waitForLimit)
	defer cancel()
	var body []byte
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
		ts.Check(err)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if re.Match(body) != neg {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	ts.Fatalf("waitmatch %s: body still %s %q after %v:\n%s", args[0], map[bool]string{false: "does not match", true: "matches"}[neg], args[1], waitForLimit, body)
}
