package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds are the custom commands available to testdata/script/*.txtar.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"exitcode":  cmdExitCode,
	"http":      cmdHTTP,
	"freeport":  cmdFreePort,
	"waitfor":   cmdWaitFor,
	"envsubst":  cmdEnvSubst,
	"dns":       cmdDNS,
	"waitmatch": cmdWaitMatch,
	// OTLP trace collector (script_otlp_test.go).
	"otlp-receiver": cmdOTLPReceiver,
	"otlp-spans":    cmdOTLPSpans,
	"burst":         cmdBurst,
}

// cmdExitCode runs a program and checks its exact exit status:
//
//	exitcode 2 router validate
//
// Its stdout and stderr are kept for the stdout and stderr commands that follow.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: bad status %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = exitErr.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// cmdHTTP sends one request and prints the status line, the x-router-error-code,
// x-router-engine and x-request-id headers when present, and the body to stdout:
//
//	http POST http://127.0.0.1:$PORT/v1/chat/completions body.json [Header:value...]
//	http GET http://127.0.0.1:$PORT/admin/state
//	http GET https://127.0.0.1:$PORT/healthz
//
// An https URL is verified against $TLS_CA (see setupTLS).
// The body argument names a file in the script's work directory.
func cmdHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: http METHOD URL [BODYFILE] [Header:value...]")
	}
	var body io.Reader
	rest := args[2:]
	if len(rest) > 0 && !strings.Contains(rest[0], ":") {
		body = strings.NewReader(ts.ReadFile(rest[0]))
		rest = rest[1:]
	}
	req, err := http.NewRequest(args[0], args[1], body)
	ts.Check(err)
	for _, h := range rest {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, v)
	}
	resp, err := scriptClient(ts, args[1]).Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%s\n", resp.Status)
	for _, h := range []string{"X-Router-Error-Code", "X-Router-Engine", "X-Request-Id"} {
		if v := resp.Header.Get(h); v != "" {
			fmt.Fprintf(ts.Stdout(), "%s: %s\n", strings.ToLower(h), v)
		}
	}
	fmt.Fprintf(ts.Stdout(), "%s\n", out)
}

// cmdBurst posts a body file to a URL N times at once and prints how many answers had
// each status, in status order, one "STATUS: COUNT" line each; a request that got no
// answer at all is counted as "lost":
//
//	burst 8 http://127.0.0.1:$R/v1/chat/completions req.json
func cmdBurst(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: burst N URL BODYFILE")
	}
	n, err := strconv.Atoi(args[0])
	ts.Check(err)
	body := ts.ReadFile(args[2])
	client := &http.Client{Timeout: 60 * time.Second}
	statuses := make(chan string, n)
	for range n {
		go func() {
			resp, err := client.Post(args[1], "application/json", strings.NewReader(body))
			if err != nil {
				statuses <- "lost"
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- strconv.Itoa(resp.StatusCode)
		}()
	}
	counts := map[string]int{}
	for range n {
		counts[<-statuses]++
	}
	for _, status := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(ts.Stdout(), "%s: %d\n", status, counts[status])
	}
}
