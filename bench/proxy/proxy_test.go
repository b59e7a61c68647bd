package proxy

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/sim"
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

// TestProcessCPUOfThisProcess: ProcessCPU counts the CPU of this process's threads. Its
// bounds are the kernel's own counters read on either side of the call, never wall time or
// a fixed figure, so a busy machine moves all three alike: at least the CPU this thread
// had used before (a running thread's schedstat may trail getrusage by one scheduler
// tick), at most what getrusage counts for the whole process after.
func TestProcessCPUOfThisProcess(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Burn 30 ms of this thread's CPU, so that it is a share of the total worth checking.
	for rusageCPU(t, rusageThread) < 30*time.Millisecond {
	}
	before := rusageCPU(t, rusageThread)
	got, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	after := rusageCPU(t, syscall.RUSAGE_SELF)
	if got < before-clockTick || got > after+clockTick {
		t.Fatalf("ProcessCPU %v, want between this thread's %v and the process's %v (± a tick)", got, before, after)
	}
	if _, err := ProcessCPU(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}

// rusageThread is Linux's RUSAGE_THREAD, which package syscall does not name.
const rusageThread = 1

// rusageCPU is the user and system CPU getrusage counts for who.
func rusageCPU(t *testing.T, who int) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// TestAtOnce runs two trials against a simulated engine at the same time: both run for the
// time given, finish requests, and their windows overlap.
func TestAtOnce(t *testing.T) {
	url := simEngine(t)
	targets := []*Target{{Name: "a", URL: url}, {Name: "b", URL: url}}
	start := time.Now()
	res, err := AtOnce(http.DefaultClient, targets, Stream, 2, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	for i, r := range res {
		if r.Requests == 0 || r.Errors != 0 || r.Elapsed < 300*time.Millisecond {
			t.Errorf("trial %d: %+v, want requests without errors for at least 300ms", i, r)
		}
		if r.Elapsed+r.Elapsed/2 < took {
			t.Errorf("trial %d ran %v of the %v both took: not at the same time", i, r.Elapsed, took)
		}
	}
	targets[1].URL = "http://127.0.0.1:1"
	if _, err := AtOnce(http.DefaultClient, targets, JSON, 1, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "b: ") {
		t.Errorf("a target that refuses: %v, want its error named", err)
	}
}

func TestWriteAtOnce(t *testing.T) {
	k := Cell{Kind: "stream", Conc: 1, Target: "router/round_robin"}
	res := func(cpu time.Duration, reqs int) Result {
		return Result{Requests: reqs, Elapsed: time.Second, CPU: cpu}
	}
	p := Pairs{k: {
		{res(300*time.Millisecond, 1000), res(330*time.Millisecond, 1000)}, // 300 and 330 µs: 1.10
		{res(400*time.Millisecond, 1000), res(480*time.Millisecond, 960)},  // 400 and 500 µs: 1.25
		{res(200*time.Millisecond, 1000), res(210*time.Millisecond, 1000)}, // 200 and 210 µs: 1.05
	}}
	var b strings.Builder
	WriteAtOnce(&b, p, "bare", []string{"json", "stream"}, []string{"router/round_robin", "router/cache_aware"}, []int{1, 8})
	// Medians: router 330 µs (210–500), bare 300 (200–400), ratios 1.10 (1.05–1.25), rates
	// 1.00 (0.96–1.00).
	want := "| stream | 1 | router/round_robin | 330 (210–500) | 300 (200–400) | 1.10 (1.05–1.25) | 1.00 (0.96–1.00) |\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
	if !strings.HasPrefix(b.String(), "| kind | c | target | CPU µs/req | bare CPU µs/req | CPU ÷ bare | req/s ÷ bare |\n") {
		t.Errorf("header does not name the reference:\n%s", b.String())
	}
	if n := strings.Count(b.String(), "\n"); n != 3 {
		t.Errorf("report has %d lines, want a header, its rule and one row:\n%s", n, b.String())
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

// simEngine starts a simulated engine at time scale 0 for the test and returns its URL.
func simEngine(t *testing.T) string {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.TimeScale = 0
	fleet, err := sim.Start(t.Context(), []sim.EngineSpec{{ID: "E1", Model: "m", Kind: plan.KindSGLang, Role: plan.RolePlain, Config: cfg}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Close() })
	return fleet.Engines()[0].URL()
}

// harnessTrials builds trials of one cell (json, 16 clients) from CPU µs per request per
// round, 1000 requests each.
func harnessTrials(cpu map[string][]float64) Trials {
	tr := Trials{}
	for name, v := range cpu {
		k := Cell{Kind: "json", Conc: 16, Target: name}
		for _, us := range v {
			tr[k] = append(tr[k], Result{Requests: 1000, Elapsed: time.Second, CPU: time.Duration(us*1000) * time.Microsecond})
		}
	}
	return tr
}

func TestWriteHarnesses(t *testing.T) {
	ours := harnessTrials(map[string][]float64{"bare_proxy": {100, 200}, "router/cache_aware": {90, 220}, "nginx": {40, 50}})
	wrk := harnessTrials(map[string][]float64{"bare_proxy": {100, 100, 100}, "router/cache_aware": {80, 90, 100}, "nginx": {40, 40, 40}})
	once := Pairs{{"json", 16, "router/cache_aware"}: {
		{Result{Requests: 1000, CPU: 100 * time.Millisecond}, Result{Requests: 1000, CPU: 95 * time.Millisecond}},
		{Result{Requests: 1000, CPU: 100 * time.Millisecond}, Result{Requests: 500, CPU: 40 * time.Millisecond}},
		{Result{Requests: 1000, CPU: 100 * time.Millisecond}, Result{Requests: 1000, CPU: 70 * time.Millisecond}},
	}}
	var b strings.Builder
	wrkOnce := Pairs{{"json", 16, "router/cache_aware"}: {{Result{Requests: 100, CPU: 10 * time.Millisecond}, Result{Requests: 100, CPU: 9 * time.Millisecond}}}}
	WriteHarnesses(&b, ours, wrk, once, wrkOnce, []string{"json"}, []string{"direct", "bare_proxy", "router/cache_aware", "nginx"}, []int{16})
	// Ours: 90 then 220 µs, median 155; ÷ bare 0.90 and 1.10, median 1.00; ÷ nginx 2.25
	// and 4.40, median 3.33. At once: 0.95, 0.80, 0.70. wrk: 90 µs, ÷ bare 0.90, ÷ nginx
	// 2.25, at once 0.90.
	for _, want := range []string{
		"| json | 16 | router/cache_aware | 155 | 90 | 1.00 | 0.90 | 0.80 | 0.90 | 3.33 | 2.25 |\n",
		"| json | 16 | bare_proxy | 150 | 100 | 1.00 | 1.00 | – | – | 3.25 | 2.50 |\n", // ÷ nginx 2.50 and 4.00
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "direct") {
		t.Errorf("direct has no CPU to compare:\n%s", b.String())
	}
}

func TestWriteNginxLine(t *testing.T) {
	ours := harnessTrials(map[string][]float64{"router/a": {100, 120, 90}, "router/b": {90}, "nginx": {40, 40, 40}})
	wrk := harnessTrials(map[string][]float64{"router/a": {110}, "router/b": {80}, "nginx": {40}})
	for _, tt := range []struct {
		name string
		goal float64
		conc int
		want string
	}{
		// a: 2.50, 3.00, 2.25, median 2.50, wrk 2.75; b: 2.25, wrk 2.00.
		{"not met", 2.5, 16, "router ÷ nginx CPU per request at 16 clients (goal ≤ 2.5): json: a 2.50 (wrk 2.75) b 2.25 (wrk 2.00); worst 2.75: not met\n"},
		{"met", 2.8, 16, "router ÷ nginx CPU per request at 16 clients (goal ≤ 2.8): json: a 2.50 (wrk 2.75) b 2.25 (wrk 2.00); worst 2.75: met\n"},
		{"no such concurrency", 2.5, 8, "router ÷ nginx CPU per request at 8 clients (goal ≤ 2.5): json: a – (wrk –) b – (wrk –); not measured (no nginx, or no such concurrency)\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			WriteNginxLine(&b, ours, wrk, []string{"json"}, []string{"router/a", "router/b"}, tt.conc, tt.goal)
			if b.String() != tt.want {
				t.Errorf("got  %q\nwant %q", b.String(), tt.want)
			}
		})
	}
}

func TestWriteResources(t *testing.T) {
	var b strings.Builder
	WriteResources(&b, map[string]Memory{"nginx": {RSS: 19 << 20, HWM: 20 << 20}, "router/x": {RSS: 3 << 19, HWM: 64 << 20}},
		map[string]float64{"router/x": 0.0125}, []string{"direct", "router/x", "nginx"})
	want := "| target | VmRSS MB | VmHWM MB | idle CPU % of a core |\n|---|---:|---:|---:|\n| router/x | 1.5 | 64.0 | 1.25 |\n| nginx | 19.0 | 20.0 | 0.00 |\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestIdleCPU: a sleeping process uses next to no CPU, and this one, with a goroutine
// burning CPU meanwhile, some, at most all cores.
func TestIdleCPU(t *testing.T) {
	sleeper := exec.Command("sleep", "5")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	time.Sleep(300 * time.Millisecond) // past its exec and start-up, which use CPU
	var done atomic.Bool
	go func() {
		for !done.Load() {
		}
	}()
	idle, err := IdleCPU([]*Target{{Name: "sleep", Cmd: sleeper}, {Name: "self", Cmd: &exec.Cmd{Process: &os.Process{Pid: os.Getpid()}}}}, 300*time.Millisecond)
	done.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel counts a process's CPU in clock ticks (10 ms): on a loaded machine the
	// sleeper's start-up can still end inside the window, one tick of it at most.
	if idle["sleep"] > 0.04 || idle["self"] <= 0.1 || idle["self"] > float64(runtime.NumCPU())+0.1 {
		t.Fatalf("idle CPU %v: want sleep at most a clock tick (0.04), self between 0.1 and %d", idle, runtime.NumCPU())
	}
}
