package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Wrk is the second harness: wrk (https://github.com/wg/wrk, Debian's package), a load
// generator in C with its own event loop and HTTP parser, none of it ours. It posts the
// same bodies as Trial at the same concurrency, so that a ratio both harnesses measure
// does not depend on our client: its Go runtime, its connection pool, or its sharing a
// process with the simulated engines.
type Wrk struct {
	bin     string
	scripts map[string]string // kind name → Lua script posting its body
}

// NewWrk finds wrk and writes, in dir, a Lua script per kind that posts the kind's body
// to /v1/chat/completions. It returns nil, nil when wrk is not installed.
func NewWrk(dir string, kinds []Kind) (*Wrk, error) {
	bin, err := exec.LookPath("wrk")
	if err != nil {
		return nil, nil
	}
	w := &Wrk{bin: bin, scripts: map[string]string{}}
	for _, k := range kinds {
		body := filepath.Join(dir, "wrk-"+k.Name+".json")
		if err := os.WriteFile(body, k.Body, 0o644); err != nil {
			return nil, err
		}
		// The body is read from its file, so no byte of it needs a Lua escape.
		script := fmt.Sprintf(`local f = assert(io.open(%q, "rb"))
wrk.body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.headers["Content-Type"] = "application/json"
`, body)
		path := filepath.Join(dir, "wrk-"+k.Name+".lua")
		if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
			return nil, err
		}
		w.scripts[k.Name] = path
	}
	return w, nil
}

// Trial runs wrk against url for d (whole seconds; wrk takes no less) with conc
// connections, on as many threads as there are cores (at most one per connection), and
// returns what it counted with the CPU process pid used meanwhile (0: not measured).
// Failed requests are wrk's non-2xx answers and socket errors; more than 1% fail the
// trial, as in Trial.
func (w *Wrk) Trial(url string, kind Kind, conc int, d time.Duration, pid int) (Result, error) {
	script, ok := w.scripts[kind.Name]
	if !ok {
		return Result{}, fmt.Errorf("wrk: no script for kind %q", kind.Name)
	}
	secs := max(1, int(d.Round(time.Second)/time.Second))
	threads := min(conc, runtime.NumCPU())
	cmd := exec.Command(w.bin, "-t", strconv.Itoa(threads), "-c", strconv.Itoa(conc), "-d", strconv.Itoa(secs)+"s",
		"--timeout", "60s", "--latency", "-s", script, url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cpu0, err := cpuOf(pid)
	if err != nil {
		return Result{}, err
	}
	out, err := cmd.Output()
	if err != nil {
		return Result{}, fmt.Errorf("wrk: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	cpu1, err := cpuOf(pid)
	if err != nil {
		return Result{}, err
	}
	res, err := parseWrk(out)
	if err != nil {
		return Result{}, fmt.Errorf("wrk's output: %w\n%s", err, out)
	}
	if res.Errors > res.Requests/100 {
		return Result{}, fmt.Errorf("wrk: %d of %d requests failed", res.Errors, res.Requests)
	}
	res.CPU = cpu1 - cpu0
	return res, nil
}

// AtOnce runs one wrk per target at the same time (see AtOnce), each with conc
// connections for d, and returns their results in order.
func (w *Wrk) AtOnce(targets []*Target, kind Kind, conc int, d time.Duration) ([]Result, error) {
	return atOnce(targets, func(t *Target) (Result, error) { return w.Trial(t.URL, kind, conc, d, t.PID()) })
}

// parseWrk reads wrk's report (run with --latency): the requests and the time of the
// run, the 50% and 99% latencies, and the failures (non-2xx answers and socket errors).
// Requests counts the answers that were not failures, as Trial's does.
func parseWrk(out []byte) (Result, error) {
	var res Result
	var seenTotal, seen50, seen99 bool
	var non2xx, sockets int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var err error
		switch {
		case len(f) >= 4 && f[1] == "requests" && f[2] == "in":
			// "734 requests in 2.00s, 349.08KB read"
			if res.Requests, err = strconv.Atoi(f[0]); err == nil {
				res.Elapsed, err = wrkDuration(strings.TrimSuffix(f[3], ","))
			}
			seenTotal = true
		case len(f) == 2 && f[0] == "50%":
			res.P50, err = wrkDuration(f[1])
			seen50 = true
		case len(f) == 2 && f[0] == "99%":
			res.P99, err = wrkDuration(f[1])
			seen99 = true
		case len(f) == 5 && f[0] == "Non-2xx":
			// "Non-2xx or 3xx responses: 6598"
			non2xx, err = strconv.Atoi(f[4])
		case len(f) >= 3 && f[0] == "Socket" && f[1] == "errors:":
			// "Socket errors: connect 0, read 0, write 0, timeout 0"
			for i := 3; i < len(f); i += 2 {
				var n int
				if n, err = strconv.Atoi(strings.TrimSuffix(f[i], ",")); err != nil {
					break
				}
				sockets += n
			}
		}
		if err != nil {
			return Result{}, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
	}
	if !seenTotal || !seen50 || !seen99 {
		return Result{}, fmt.Errorf("no request count or latency distribution (was wrk run with --latency?)")
	}
	// wrk counts non-2xx answers among its requests and socket errors apart.
	res.Requests, res.Errors = max(0, res.Requests-non2xx), non2xx+sockets
	return res, nil
}

// wrkDuration parses wrk's times: a number with us, ms, s, m or h.
func wrkDuration(s string) (time.Duration, error) {
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("time %q: %w", s, err)
			}
			return time.Duration(v * float64(u.unit)), nil
		}
	}
	return 0, fmt.Errorf("time %q: no unit", s)
}
