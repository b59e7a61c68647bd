package quality

import (
	"bufio"
	"strings"
	"testing"
)

func TestRequestsTotalSumsRanks(t *testing.T) {
	metrics := "# HELP sglang:num_requests_total x\nsglang:num_running_reqs{a=\"1\"} 3\nsglang:num_requests_total{dp_rank=\"0\"} 7\nsglang:num_requests_total{dp_rank=\"1\"} 5\n"
	n, err := requestsTotal(bufio.NewScanner(strings.NewReader(metrics)))
	if err != nil || n != 12 {
		t.Fatalf("got %d, %v; want 12", n, err)
	}
	if _, err := requestsTotal(bufio.NewScanner(strings.NewReader("sglang:num_running_reqs{} 1\n"))); err == nil {
		t.Fatal("missing counter not reported")
	}
}

func TestBusiestShare(t *testing.T) {
	for _, tc := range []struct {
		counts []int
		want   float64
	}{{[]int{5, 5, 5, 5}, 1}, {[]int{20, 0, 0, 0}, 4}, {[]int{10, 5, 5, 0}, 2}, {[]int{0, 0}, 0}} {
		if got := busiestShare(tc.counts); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.counts, got, tc.want)
		}
	}
}
