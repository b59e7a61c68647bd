package proxy

import (
	"os"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	status := "Name:\tnginx\nVmPeak:\t   20000 kB\nVmHWM:\t   19660 kB\nVmRSS:\t   18432 kB\nThreads:\t1\n"
	m, err := parseStatus([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if m != (Memory{RSS: 18432 << 10, HWM: 19660 << 10}) {
		t.Fatalf("got %+v", m)
	}
	for name, bad := range map[string]string{
		"kernel thread (no Vm lines)": "Name:\tkthreadd\nThreads:\t1\n",
		"no unit":                     strings.Replace(status, "18432 kB", "18432", 1),
		"not a number":                strings.Replace(status, "19660", "19x60", 1),
	} {
		if got, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("%s: accepted as %+v", name, got)
		}
	}
}

// TestProcessMemoryOfThisProcess: this process's resident memory is what the kernel says
// in its own units, and its peak is at least what it holds now.
func TestProcessMemoryOfThisProcess(t *testing.T) {
	m, err := ProcessMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS || m.RSS%1024 != 0 {
		t.Fatalf("got %+v", m)
	}
	if _, err := ProcessMemory(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
