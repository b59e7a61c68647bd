// Package proxy measures what a proxy hop costs: the router against a bare
// httputil.ReverseProxy, nginx when installed, and no proxy at all, in one run against
// simulated engines that do not sleep. `make bench-proxy` runs it; docs/benchmarks.md
// records its figures.
package proxy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc CPU times; 100 on every Linux architecture Go
// supports.
const clockTick = 10 * time.Millisecond

// ProcessCPU returns the CPU time used so far by process pid and its live children
// (nginx's workers are children of its master).
func ProcessCPU(pid int) (time.Duration, error) {
	total, err := processCPU(pid)
	if err != nil {
		return 0, err
	}
	kids, err := children(pid)
	if err != nil {
		return 0, err
	}
	for _, k := range kids {
		if c, err := processCPU(k); err == nil {
			total += c
		}
	}
	return total, nil
}

// processCPU prefers the nanosecond run time of each thread (/proc/pid/task/*/schedstat)
// to /proc/pid/stat's ticks: a trial of 3000 requests at 130 µs each is 39 ticks, so a
// tick's truncation at each end moved a cell's ratio by up to 5%. Only live threads are
// counted; Go's runtime and nginx's workers keep theirs for the process's lifetime, and a
// kernel without schedstat falls back to ticks.
func processCPU(pid int) (time.Duration, error) {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := bytes.Fields(data)
		if len(f) == 0 {
			continue // the thread exited between open and read
		}
		ns, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("cpu time of process %d: malformed %s", pid, f)
		}
		total += time.Duration(ns)
	}
	if total > 0 {
		return total, nil
	}
	return statCPU(pid)
}

// statCPU reads utime and stime (fields 14 and 15) of /proc/pid/stat.
func statCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu time of process %d: %w", pid, err)
	}
	f, err := statFields(data)
	if err != nil {
		return 0, fmt.Errorf("cpu time of process %d: %w", pid, err)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu time of process %d: malformed stat", pid)
	}
	return time.Duration(u+s) * clockTick, nil
}

// statFields splits /proc/pid/stat after the command name (which may hold spaces and
// parentheses): field 3 (state) is element 0.
func statFields(data []byte) ([]string, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("malformed stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return nil, fmt.Errorf("malformed stat")
	}
	return f, nil
}

// children lists the processes whose parent is pid.
func children(pid int) ([]int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, d := range dirs {
		data, err := os.ReadFile(d)
		if err != nil {
			continue // exited meanwhile
		}
		f, err := statFields(data)
		if err != nil {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			k, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			out = append(out, k)
		}
	}
	return out, nil
}

// IdleCPU measures, for d with no requests, the CPU each target's process uses on its
// own (the router's polling of engines and KV events, the runtime's timers), as a share
// of a core. Every trial's CPU includes it: at one client, where a request takes longest,
// it weighs most per request.
func IdleCPU(targets []*Target, d time.Duration) (map[string]float64, error) {
	before := make([]time.Duration, len(targets))
	for i, t := range targets {
		c, err := ProcessCPU(t.PID())
		if err != nil {
			return nil, err
		}
		before[i] = c
	}
	start := time.Now()
	time.Sleep(d)
	elapsed := time.Since(start)
	out := map[string]float64{}
	for i, t := range targets {
		c, err := ProcessCPU(t.PID())
		if err != nil {
			return nil, err
		}
		out[t.Name] = float64(c-before[i]) / float64(elapsed)
	}
	return out, nil
}
