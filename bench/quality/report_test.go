package quality

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var outs []Outcome
	for i := 1; i <= 100; i++ {
		outs = append(outs, Outcome{Sent: time.Duration(i) * 10 * time.Millisecond, TTFT: time.Duration(i) * time.Millisecond,
			E2E: time.Duration(i) * 2 * time.Millisecond, PromptTokens: 100, CachedTokens: 25, OutputTokens: 4})
	}
	outs = append(outs, Outcome{Err: errors.New("status 503")})
	r := Summarize("w", "p", outs)
	if r.Requests != 101 || r.Errors != 1 {
		t.Fatalf("requests %d errors %d", r.Requests, r.Errors)
	}
	if r.TTFT != [3]time.Duration{50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond} {
		t.Fatalf("TTFT %v", r.TTFT)
	}
	if r.E2E[0] != 100*time.Millisecond {
		t.Fatalf("E2E p50 %v", r.E2E[0])
	}
	if r.HitRate != 0.25 {
		t.Fatalf("hit rate %v", r.HitRate)
	}
	// First send at 10 ms, last answer at 1000+200 ms: 100 requests in 1.19 s.
	if r.RequestsPerSec < 84 || r.RequestsPerSec > 84.1 || r.TokensPerSec < 336 || r.TokensPerSec > 336.2 {
		t.Fatalf("rates %v %v", r.RequestsPerSec, r.TokensPerSec)
	}
}

func TestSummarizeAllFailed(t *testing.T) {
	r := Summarize("w", "p", []Outcome{{Err: errors.New("x")}})
	if r.Errors != 1 || r.TTFT[2] != 0 || r.RequestsPerSec != 0 || r.HitRate != 0 {
		t.Fatalf("%+v", r)
	}
}

func sampleRows() []Row {
	return []Row{
		{Workload: "shared_documents", Policy: "random", Requests: 10, TTFT: [3]time.Duration{120 * time.Millisecond, 900 * time.Millisecond, 2 * time.Second}, RequestsPerSec: 9.5, TokensPerSec: 152, HitRate: 0.2},
		{Workload: "shared_documents", Policy: "cache_aware/local_index", Requests: 10, Errors: 1, TTFT: [3]time.Duration{4500 * time.Microsecond, 8 * time.Millisecond, 30 * time.Millisecond}, HitRate: 0.91},
	}
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	if err := WriteTable(&b, sampleRows()); err != nil {
		t.Fatal(err)
	}
	want := "| shared_documents | cache_aware/local_index | 9/10 | 4.5 | 8.0 | 30 | 0.0 | 0.0 | 0.0 | 0 | 91% |"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("table lacks %q:\n%s", want, b.String())
	}
	if !strings.Contains(b.String(), "| shared_documents | random | 10/10 | 120 | 900 | 2000 |") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestWriteSVG(t *testing.T) {
	var b strings.Builder
	if err := WriteSVG(&b, sampleRows()); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	if !strings.HasPrefix(s, "<svg ") || !strings.HasSuffix(s, "</svg>\n") {
		t.Fatal("not an svg document")
	}
	if strings.Count(s, "<rect") != 2 || !strings.Contains(s, ">cache_aware/local_index<") || !strings.Contains(s, ">shared_documents<") {
		t.Fatalf("svg:\n%s", s)
	}
	// The log axis spans the decades of the data: 1 ms to 10 s.
	if !strings.Contains(s, ">1<") || !strings.Contains(s, ">10000<") {
		t.Fatalf("axis labels missing:\n%s", s)
	}
}

func TestClassTable(t *testing.T) {
	outs := []Outcome{
		{Class: "documents", TTFT: 10 * time.Millisecond, PromptTokens: 100, CachedTokens: 90},
		{Class: "conversations", TTFT: 50 * time.Millisecond, PromptTokens: 100, CachedTokens: 20},
	}
	rows := []Row{Summarize("mix", "p", outs), Summarize("one", "p", outs[:1])}
	if rows[1].Classes != nil {
		t.Fatal("a single-class workload has no class figures")
	}
	var b strings.Builder
	if err := WriteClassTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := "| workload | policy | conversations TTFT p90 | hit | documents TTFT p90 | hit |\n|---|---|---:|---:|---:|---:|\n| mix | p | 50 | 20% | 10 | 90% |\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
