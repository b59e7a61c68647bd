// Command polling measures what an idle router spends on watching its fleet: health checks
// and load polling of N simulated engines, as CPU time of the router process over a
// window without requests. `make bench-polling` runs it at 8, 64, 512 and 2048 engines.
//
// With -floor it measures, in the router's place, a child process that does nothing but
// one write of the router's request and the reads of its answer per engine each 500 ms
// over kept-alive connections (floor_linux.go): what the kernel's loopback TCP costs per
// poll, under which no poller of the router's can go.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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
	if os.Getenv(floorEnv) != "" {
		return floorChild(500 * time.Millisecond)
	}
	routerBin := flag.String("router", "bin/router", "router binary")
	sizes := flag.String("engines", "8,64,512,2048", "fleet sizes")
	window := flag.Duration("window", 20*time.Second, "idle time measured per size")
	floor := flag.Bool("floor", false, "measure the floor poller in place of the router")
	flag.Parse()
	fmt.Println("| engines | router CPU, % of one core | per engine, µs/s | healthy, fresh report at the end |")
	fmt.Println("|---:|---:|---:|---:|")
	for _, s := range strings.Split(*sizes, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			return fmt.Errorf("bad fleet size %q", s)
		}
		pct, fresh, err := measure(*routerBin, *floor, n, *window)
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %.1f | %.1f | %d |\n", n, pct, pct/100*1e6/float64(n), fresh)
	}
	return nil
}

// measure starts n engines and a router over them, waits for the first reports to settle,
// and returns the router's CPU over window as a percentage of one core, and how many
// engines the router then counts healthy with a fresh load report: a router that fell
// behind its polls would look cheap, and this says it did not. With floor it measures
// the floor poller instead, which has no metrics: fresh is then 0.
func measure(routerBin string, floor bool, n int, window time.Duration) (pct float64, fresh int, err error) {
	cfg := sim.DefaultConfig()
	cfg.TimeScale = 0
	fleet, err := sim.Start(context.Background(), sim.PlainSGLang(n, "m", cfg, nil))
	if err != nil {
		return 0, 0, err
	}
	defer fleet.Close()
	var urls []string
	for _, e := range fleet.Engines() {
		urls = append(urls, e.URL())
	}
	if floor {
		return measureFloor(urls, window)
	}
	dir, err := os.MkdirTemp("", "bench-polling-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	t, err := proxy.StartRouter(routerBin, "router", dir, "power_of_two", "", urls, nil)
	if err != nil {
		return 0, 0, err
	}
	defer t.Stop()
	time.Sleep(3 * time.Second) // start-up and first polls
	c0, err := proxy.ProcessCPU(t.PID())
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	time.Sleep(window)
	c1, err := proxy.ProcessCPU(t.PID())
	if err != nil {
		return 0, 0, err
	}
	pct = 100 * float64(c1-c0) / float64(time.Since(start))
	fresh, err = freshEngines(t.URL)
	return pct, fresh, err
}

// measureFloor runs this program as the floor poller over urls and returns its CPU over
// window as a percentage of one core.
func measureFloor(urls []string, window time.Duration) (pct float64, fresh int, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorEnv+"=1")
	cmd.Stdin = strings.NewReader(strings.Join(urls, "\n"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		return 0, 0, fmt.Errorf("the floor poller did not start: %q %v", line, err)
	}
	time.Sleep(3 * time.Second)
	c0, err := proxy.ProcessCPU(cmd.Process.Pid)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	time.Sleep(window)
	c1, err := proxy.ProcessCPU(cmd.Process.Pid)
	if err != nil {
		return 0, 0, err
	}
	return 100 * float64(c1-c0) / float64(time.Since(start)), 0, nil
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
