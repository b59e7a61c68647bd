package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory is a process's resident memory from /proc/PID/status, in bytes, summed over it
// and its live children (nginx's workers): VmRSS now and VmHWM, the most it has held.
// For several processes the sum of their peaks bounds the peak of their sum from above.
type Memory struct{ RSS, HWM int64 }

// ProcessMemory reads the Memory of process pid and its live children.
func ProcessMemory(pid int) (Memory, error) {
	m, err := processMemory(pid)
	if err != nil {
		return Memory{}, err
	}
	kids, err := children(pid)
	if err != nil {
		return Memory{}, err
	}
	for _, k := range kids {
		if c, err := processMemory(k); err == nil {
			m.RSS, m.HWM = m.RSS+c.RSS, m.HWM+c.HWM
		}
	}
	return m, nil
}

func processMemory(pid int) (Memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	m, err := parseStatus(data)
	if err != nil {
		return Memory{}, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	return m, nil
}

// parseStatus reads VmRSS and VmHWM ("VmRSS:	   48212 kB") from a /proc/PID/status.
func parseStatus(data []byte) (Memory, error) {
	var m Memory
	var seen int
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("malformed %s line %q", key, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("malformed %s line %q", key, sc.Text())
		}
		if key == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.HWM = kb << 10
		}
		seen++
	}
	if seen != 2 {
		return Memory{}, fmt.Errorf("no VmRSS and VmHWM (a kernel thread or a zombie?)")
	}
	return m, nil
}
