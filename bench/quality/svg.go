package quality

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// WriteSVG plots the TTFT percentiles of every policy, one panel per workload: for each
// policy a bar to p50, a thicker mark at p90 and a thin line up to p99, on a logarithmic
// axis (policies differ by orders of magnitude, which a linear axis flattens).
func WriteSVG(w io.Writer, rows []Row) error {
	var workloads, policies []string
	for _, r := range rows {
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
		if !slices.Contains(policies, r.Policy) {
			policies = append(policies, r.Policy)
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		for _, d := range r.TTFT {
			if d > 0 {
				v := math.Log10(float64(d) / float64(time.Millisecond))
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi == lo {
		hi++
	}
	const (
		left, top, panelH, gap, barW, slot = 70.0, 30.0, 180.0, 70.0, 14.0, 60.0
	)
	width := left + slot*float64(len(policies)) + 20
	height := top + float64(len(workloads))*(panelH+gap)
	y := func(d time.Duration, base float64) float64 {
		v := math.Log10(math.Max(float64(d)/float64(time.Millisecond), math.Pow(10, lo)))
		return base + panelH - (v-lo)/(hi-lo)*panelH
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%.0f" y="16" font-size="13">TTFT per policy (ms, log scale): bar p50, tick p90, line p99</text>`+"\n", left)
	for wi, wl := range workloads {
		base := top + float64(wi)*(panelH+gap)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", left, base-4, html.EscapeString(wl))
		for e := lo; e <= hi; e++ {
			yy := base + panelH - (e-lo)/(hi-lo)*panelH
			fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%g</text>`+"\n",
				left, width-20, yy, yy, left-4, yy+4, math.Pow(10, e))
		}
		for pi, pol := range policies {
			x := left + slot*float64(pi) + slot/2
			for _, r := range rows {
				if r.Workload != wl || r.Policy != pol || r.TTFT[0] == 0 {
					continue
				}
				y50, y90, y99 := y(r.TTFT[0], base), y(r.TTFT[1], base), y(r.TTFT[2], base)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill="#4a7ebb"/>`, x-barW/2, y50, barW, base+panelH-y50)
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#c33"/>`, x, x, y99, y50)
				fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#c33" stroke-width="3"/>`+"\n", x-barW/2, x+barW/2, y90, y90)
			}
			fmt.Fprintf(&b, `<text transform="translate(%.1f,%.1f) rotate(30)">%s</text>`+"\n", x-barW/2, base+panelH+12, html.EscapeString(pol))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
