package logline

import "strings"

// Bounds on client-influenced text the router keeps (decisions, logs).
const (
	MaxModelText = 128
	MaxErrorText = 1024
)

// Clip returns s cut to at most n bytes on a rune boundary, marked with "…" when cut,
// with control characters replaced so a log line stays one line.
func Clip(s string, n int) string {
	cut := false
	if len(s) > n {
		s, cut = strings.ToValidUTF8(s[:n], ""), true // drops a rune cut in half
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if cut {
		s += "…"
	}
	return s
}
