// Command polling measures what an idle router spends on watching its fleet: health checks
// and load polling of N simulated engines, as CPU time of the router process over a
// window without requests. `make bench-polling` runs it at 8, 64, 512 and 2048 engines.
//
// With -floor it measures, in the router's place, a child process that does nothing but
// one write of the router's request and the reads of its answer per engine each 500 ms
// over kept-alive connections (floor_linux.go): what the kernel's loopback TCP costs per
// poll, under which no poller of the router's can go. -floor-gather makes the floor read
// in the router's shards' shape, a slot's answers together, rather than as they arrive.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/routerkit/router/bench/proxy"
	"github.com/routerkit/router/runtime/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-polling:", err)
		os.Exit(1)
	}
}

func run() error {
	if v := os.Getenv(floorEnv); v != "" {
		gather, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %w", floorEnv, err)
		}
		return floorChild(500*time.Millisecond, gather)
	}
	routerBin := flag.String("router", "bin/router", "router binary")
	sizes := flag.String("engines", "8,64,512,2048", "fleet sizes")
	window := flag.Duration("window", 20*time.Second, "idle time measured per size")
	floor := flag.Bool("floor", false, "measure the floor poller in place of the router")
	gather := flag.Duration("floor-gather", 0, "with -floor, read the answers this long after a slot's writes and at the next slot, as the router's shards do, instead of as they arrive")
	flag.Parse()
	fmt.Println("| engines | router CPU, % of one core | per engine, µs/s | write calls/s | CPU µs per write call | healthy, fresh report at the end |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|")
	for _, s := range strings.Split(*sizes, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			return fmt.Errorf("bad fleet size %q", s)
		}
		r, err := measure(*routerBin, *floor, *gather, n, *window)
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %.1f | %.1f | %.0f | %.1f | %d |\n", n, r.pct, r.pct/100*1e6/float64(n), r.writes, r.pct/100*1e6/r.writes, r.fresh)
	}
	return nil
}

// result is what measure found: the process's CPU as a percentage of one core, its write
// system calls per second (one per poll sent, so a process that fell behind shows fewer,
// and CPU per write call compares pollers that did not poll as often), and the engines
// healthy with a fresh report at the end.
type result struct {
	pct, writes float64
	fresh       int
}

// observe measures process pid over d.
func observe(pid int, d time.Duration) (result, error) {
	c0, err := proxy.ProcessCPU(pid)
	if err != nil {
		return result{}, err
	}
	w0, err := writeCalls(pid)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	time.Sleep(d)
	c1, err := proxy.ProcessCPU(pid)
	if err != nil {
		return result{}, err
	}
	w1, err := writeCalls(pid)
	if err != nil {
		return result{}, err
	}
	el := time.Since(start)
	return result{pct: 100 * float64(c1-c0) / float64(el), writes: float64(w1-w0) / el.Seconds()}, nil
}

// writeCalls reads the count of write system calls of process pid (syscw in
// /proc/pid/io), which counts raw ones too.
func writeCalls(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, fmt.Errorf("write calls of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("write calls of process %d: no syscw in /proc/%d/io", pid, pid)
}

// measure starts n engines and a router over them, waits for the first reports to settle,
// and returns the router's CPU over window as a percentage of one core, and how many
// engines the router then counts healthy with a fresh load report: a router that fell
// behind its polls would look cheap, and this says it did not. With floor it measures
// the floor poller instead, which has no metrics: fresh is then 0.
func measure(routerBin string, floor bool, gather time.Duration, n int, d time.Duration) (result, error) {
	cfg := sim.DefaultConfig()
	cfg.TimeScale = 0
	fleet, err := sim.Start(context.Background(), sim.PlainSGLang(n, "m", cfg, nil))
	if err != nil {
		return result{}, err
	}
	defer fleet.Close()
	var urls []string
	for _, e := range fleet.Engines() {
		urls = append(urls, e.URL())
	}
	if floor {
		return measureFloor(urls, gather, d)
	}
	dir, err := os.MkdirTemp("", "bench-polling-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	t, err := proxy.StartRouter(routerBin, "router", dir, "power_of_two", "", urls, nil)
	if err != nil {
		return result{}, err
	}
	defer t.Stop()
	time.Sleep(3 * time.Second) // start-up and first polls
	r, err := observe(t.PID(), d)
	if err != nil {
		return result{}, err
	}
	r.fresh, err = freshEngines(t.URL)
	return r, err
}

// measureFloor runs this program as the floor poller over urls and measures it over d.
func measureFloor(urls []string, gather, d time.Duration) (result, error) {
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorEnv+"="+gather.String())
	cmd.Stdin = strings.NewReader(strings.Join(urls, "\n"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		return result{}, fmt.Errorf("the floor poller did not start: %q %v", line, err)
	}
	time.Sleep(3 * time.Second)
	return observe(cmd.Process.Pid, d)
}

// freshEngines counts the engines the router's /metrics shows healthy and with a load
// report (router_engine_report_age_seconds is -1 without a fresh one).
func freshEngines(routerURL string) (int, error) {
	resp, err := http.Get(routerURL + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("reading the router's metrics: %w", err)
	}
	defer resp.Body.Close()
	healthy, fresh := map[string]bool{}, 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ages []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "router_engine_healthy{"):
			healthy[engineLabel(line)] = strings.HasSuffix(line, " 1")
		case strings.HasPrefix(line, "router_engine_report_age_seconds{"):
			ages = append(ages, line)
		}
	}
	for _, line := range ages {
		if healthy[engineLabel(line)] && !strings.HasSuffix(line, " -1") {
			fresh++
		}
	}
	return fresh, sc.Err()
}

// engineLabel returns the engine label's value of a metrics line.
func engineLabel(line string) string {
	_, rest, _ := strings.Cut(line, `engine="`)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}
