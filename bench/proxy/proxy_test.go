package proxy

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStatFields(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 1 0 0"
	f, err := statFields([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if f[0] != "S" || f[1] != "1" || f[11] != "250" || f[12] != "75" {
		t.Fatalf("fields %v", f)
	}
	if _, err := statFields([]byte("42 no parenthesis")); err == nil {
		t.Fatal("malformed stat accepted")
	}
}

func TestProcessCPUOfThisProcess(t *testing.T) {
	// Burn 30 ms of this thread's CPU, counted by the kernel (a loop on wall time burns
	// less when the test shares the machine, as it does under make test).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const rusageThread = 1 // RUSAGE_THREAD
	for {
		var ru syscall.Rusage
		if err := syscall.Getrusage(rusageThread, &ru); err != nil {
			t.Fatal(err)
		}
		if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= 30*time.Millisecond {
			break
		}
	}
	got, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	want := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	// getrusage also counts threads that have exited; a tick of rounding either way.
	if got < 30*time.Millisecond || got > want+clockTick || got < want/2 {
		t.Fatalf("ProcessCPU %v, getrusage %v", got, want)
	}
	if _, err := ProcessCPU(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

func TestSummarize(t *testing.T) {
	if s := summarize([]float64{3, 1, 2}); s != (stat{2, 1, 3}) {
		t.Fatalf("odd: %+v", s)
	}
	if s := summarize([]float64{4, 1, 2, 3}); s != (stat{2.5, 1, 4}) {
		t.Fatalf("even: %+v", s)
	}
}

func TestWriteReport(t *testing.T) {
	tr := Trials{}
	add := func(target string, p50 time.Duration, cpu time.Duration, reqs int) {
		k := Cell{Kind: "json", Conc: 8, Target: target}
		tr[k] = append(tr[k], Result{Requests: reqs, Elapsed: time.Second, P50: p50, P99: 2 * p50, CPU: cpu})
	}
	// Round 1.
	add("direct", 100*time.Microsecond, 0, 4000)
	add("bare_proxy", 300*time.Microsecond, 200*time.Millisecond, 2000)
	add("router/round_robin", 400*time.Microsecond, 230*time.Millisecond, 1800)
	add("nginx", 200*time.Microsecond, 100*time.Millisecond, 2500)
	// Round 2, a slow spell: everyone's CPU per request is higher.
	add("direct", 100*time.Microsecond, 0, 4000)
	add("bare_proxy", 300*time.Microsecond, 300*time.Millisecond, 2000)
	add("router/round_robin", 400*time.Microsecond, 297*time.Millisecond, 1800)
	add("nginx", 200*time.Microsecond, 125*time.Millisecond, 2500)
	var b strings.Builder
	WriteReport(&b, tr, []string{"json", "stream"}, []string{"direct", "bare_proxy", "router/round_robin", "nginx"}, []int{8})
	for _, want := range []string{
		"| json | 8 | direct | 4000 (4000–4000) | – | – | – |",
		// Router: 230 ms over 1800 requests is 128 µs, then 165 µs; the bare proxy 100
		// then 150 µs, so 1.28 and 1.10 in the rounds, 1.19 their median (where the
		// ratio of the medians, 146 ÷ 125, would be 1.17). nginx: 40 then 50 µs.
		"| json | 8 | router/round_robin | 1800 (1800–1800) | 300 | 600 | 146 (128–165) | 1.19 (1.10–1.28) | 3.25 (3.19–3.30) | 0.90 (0.90–0.90) | 0.72 (0.72–0.72) | 0 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestLongBody: the long kind is a valid chat of about the asked size whose turns differ
// and which ends with a user turn.
func TestLongBody(t *testing.T) {
	k := Long([]byte("Some prose, \"quoted\".\n"), 10_000)
	var chat struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.Unmarshal(k.Body, &chat); err != nil {
		t.Fatal(err)
	}
	n, seen := 0, map[string]bool{}
	for _, m := range chat.Messages {
		n += len(m.Content)
		if seen[m.Content] {
			t.Fatalf("turn %q repeated", m.Content)
		}
		seen[m.Content] = true
	}
	if k.Name != "long" || n < 10_000 || n > 10_100 || chat.Messages[len(chat.Messages)-1].Role != "user" {
		t.Fatalf("kind %s, %d bytes of content, last role %s", k.Name, n, chat.Messages[len(chat.Messages)-1].Role)
	}
}
