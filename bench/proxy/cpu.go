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

// ProcessCPU returns the user plus system CPU time used so far by process pid and its
// live children (nginx's workers are children of its master).
func ProcessCPU(pid int) (time.Duration, error) {
	total, err := statCPU(pid)
	if err != nil {
		return 0, err
	}
	kids, err := children(pid)
	if err != nil {
		return 0, err
	}
	for _, k := range kids {
		if c, err := statCPU(k); err == nil {
			total += c
		}
	}
	return total, nil
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
