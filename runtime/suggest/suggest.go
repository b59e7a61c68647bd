// Package suggest finds the name a user probably meant, for the "did you mean" of error
// messages about misspelt configuration fields and fixture keys.
package suggest

// Closest returns the name in names nearest to bad, if it is fewer than maxDist edits
// away, else "". Ties go to the earlier name, so callers control the preference order.
func Closest(bad string, names []string, maxDist int) string {
	best, bestDist := "", maxDist
	for _, name := range names {
		if name == bad {
			continue
		}
		if d := Distance(bad, name); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
