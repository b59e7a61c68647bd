package legacy

import (
	"fmt"
	"strings"
)

// header is the comment at the top of a migrated configuration: the command line it came
// from, and how the routing it configures differs from sgl-router's, so that no change of
// behaviour goes unmentioned.
func header(in Input, c *cli) []string {
	lines := []string{
		"Router configuration migrated by `router migrate` from this sgl-router command line:",
		"",
		"\tsgl-router " + shellJoin(in.Args),
		"",
	}
	if in.BucketConfig != "" {
		lines = append(lines, "with the buckets of "+in.BucketConfig+".")
	}
	if len(in.Pairs) > 0 {
		lines = append(lines, wrap("Prefill and decode buckets are paired as the --pair arguments say: "+strings.Join(in.Pairs, ", ")+".", "")...)
	}
	if in.BucketConfig != "" || len(in.Pairs) > 0 {
		lines = append(lines, "")
	}
	lines = append(lines, wrap("Each value's comment names the flag it came from. A setting that is absent keeps sgl-router's default, which is also the router's.", "")...)
	if notes := notes(in, c); len(notes) > 0 {
		lines = append(lines, "", "Behaviour that differs from sgl-router:")
		for _, n := range notes {
			lines = append(lines, wrap(n, "  - ")...)
		}
	}
	return lines
}

// notes lists the deliberate changes of the target design (spec §7) that apply to this
// command line.
func notes(in Input, c *cli) []string {
	var out []string
	policy := c.policyType()
	var capacity []string
	switch policy {
	case "power_of_two", "session_aware", "cache_aware":
		capacity = append(capacity, "--policy "+policy)
	}
	if c.pdMode() {
		capacity = append(capacity, "decode")
	}
	if len(capacity) > 0 {
		out = append(out, fmt.Sprintf("sgl-router also checked each engine's reported capacity (running requests and KV tokens) before %s picks. Admission caps are absolute here, and the command line sets none of these: to keep a capacity check, set admission.max_running_requests and admission.max_kv_tokens from the engines' limits.", strings.Join(capacity, " and ")))
	}
	if policy == "session_aware" && c.affinityMode == nil {
		out = append(out, "--affinity-mode was omitted, which sgl-router took as soft: an admitted backup engine could relieve a busy session's engine. session_aware always reuses the session's admitted binding, the former strict mode.")
	}
	bucketed := in.BucketConfig != "" || c.bucketConfig != nil
	if bucketed {
		out = append(out, "Buckets are tried in order of input capacity, then rank, then id, and a bucket's prefill and decode engines are chosen together; sgl-router ordered each stage's buckets by rank alone and chose them separately.")
		if policy == "cache_aware" || policy == "sticky" {
			out = append(out, "sgl-router looked for "+policy+" affinity across every bucket before the size buckets; here each bucket's policy looks among its own engines only.")
		}
	}
	if policy == "cache_aware" && c.prefixProvider() == "radix_tree" {
		out = append(out, "The local prefix index learns from the engines' KV-event publishers, which the command line does not name: add kv_events: {endpoint: \"tcp://HOST:PORT\"} to each engine that publishes KV events.")
	}
	return out
}

// wrap breaks text into comment lines of at most 88 columns, the first prefixed with
// first and the others indented to match.
func wrap(text, first string) []string {
	const width = 88
	var lines []string
	line, empty := first, true
	for _, w := range strings.Fields(text) {
		if !empty && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line, empty = strings.Repeat(" ", len(first)), true
		}
		if !empty {
			line += " "
		}
		line, empty = line+w, false
	}
	return append(lines, line)
}

// shellJoin quotes args for a POSIX shell where they need it, so the header shows a
// command line that can be pasted back.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=/.:,@%+", r))
		}) {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
