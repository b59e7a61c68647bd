package suggest

import "testing"

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3},
		{"running", "runing", 1}, {"waiting", "wiating", 2}, {"same", "same", 0},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"running", "waiting", "inflight"}
	tests := []struct {
		bad     string
		maxDist int
		want    string
	}{
		{"runing", 3, "running"},
		{"waitign", 3, "waiting"},
		{"healthy", 3, ""}, // nothing near
		{"running", 3, ""}, // the name itself is not a suggestion
		{"inflite", 3, ""}, // three edits away, limit exclusive
		{"inflite", 4, "inflight"},
	}
	for _, tt := range tests {
		if got := Closest(tt.bad, names, tt.maxDist); got != tt.want {
			t.Errorf("Closest(%q, %d) = %q, want %q", tt.bad, tt.maxDist, got, tt.want)
		}
	}
}
