package proxy

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestParseWrk reads outputs of wrk 4.1.0 (Debian's package) recorded against `router
// serve --demo`: one run whose answers were all 200, one whose were all 404.
func TestParseWrk(t *testing.T) {
	for _, tt := range []struct {
		file string
		want Result
	}{
		{"testdata/wrk-latency.txt", Result{Requests: 734, Elapsed: 2 * time.Second, P50: 10650 * time.Microsecond, P99: 19950 * time.Microsecond}},
		{"testdata/wrk-non2xx.txt", Result{Requests: 0, Elapsed: time.Second, P50: 139 * time.Microsecond, P99: 1200 * time.Microsecond, Errors: 6598}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			out, err := os.ReadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseWrk(out)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestParseWrkSocketErrors: socket errors are failures, and not among wrk's requests.
func TestParseWrkSocketErrors(t *testing.T) {
	out, err := os.ReadFile("testdata/wrk-latency.txt")
	if err != nil {
		t.Fatal(err)
	}
	with := strings.Replace(string(out), "Requests/sec:", "  Socket errors: connect 0, read 3, write 1, timeout 2\nRequests/sec:", 1)
	got, err := parseWrk([]byte(with))
	if err != nil {
		t.Fatal(err)
	}
	if got.Requests != 734 || got.Errors != 6 {
		t.Fatalf("got %d requests and %d errors, want 734 and 6", got.Requests, got.Errors)
	}
}

func TestParseWrkRefuses(t *testing.T) {
	out, err := os.ReadFile("testdata/wrk-latency.txt")
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"no latency distribution": strings.Split(string(out), "  Latency Distribution")[0] + "  734 requests in 2.00s, 349.08KB read\n",
		"a time without unit":     strings.Replace(string(out), "10.65ms", "10.65", 1),
		"a bad request count":     strings.Replace(string(out), "734 requests", "7x4 requests", 1),
		"unable to connect":       "unable to connect to 127.0.0.1:1 Connection refused\n",
	} {
		if got, err := parseWrk([]byte(bad)); err == nil {
			t.Errorf("%s: accepted as %+v", name, got)
		}
	}
}

// TestWrkTrial runs wrk against a simulated engine: the script posts the kind's body, so
// the engine answers 200 to every request and the trial counts them. `make test` installs
// wrk first (make wrk-nginx).
func TestWrkTrial(t *testing.T) {
	url := simEngine(t)
	w, err := NewWrk(t.TempDir(), []Kind{JSON, Stream})
	if err != nil {
		t.Fatal(err)
	}
	if w == nil {
		t.Fatal("wrk is not installed: make wrk-nginx")
	}
	for _, k := range []Kind{JSON, Stream} {
		res, err := w.Trial(url, k, 2, time.Second, os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests < 10 || res.Errors != 0 || res.Elapsed < time.Second || res.P50 <= 0 || res.P99 < res.P50 || res.CPU <= 0 {
			t.Errorf("%s: %+v", k.Name, res)
		}
	}
}
