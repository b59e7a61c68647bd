package legacy

import (
	"strings"
)

// header is the comment at the top of a migrated configuration: the command line it came
// from, and how the routing it configures differs from sgl-router's, so that no change of
// behaviour goes unmentioned.
func header(t *translator) []string {
	in := t.in
	program := t.c.program
	if program == "" {
		program = "sgl-router"
	}
	args := in.Args[len(strings.Fields(t.c.program)):]
	lines := []string{
		"Router configuration migrated by `router migrate` from this sgl-router command line:",
		"",
		"\t" + program + " " + shellJoin(args),
		"",
	}
	lines = append(lines, wrap("Absent flags have the defaults of "+t.c.dialect.defaultsSource()+", chosen by "+t.c.dialectFrom+".", "")...)
	lines = append(lines, "")
	if in.BucketConfig != "" {
		lines = append(lines, "with the buckets of "+in.BucketConfig+".")
	}
	if len(in.Pairs) > 0 {
		lines = append(lines, wrap("Prefill and decode buckets are paired as the --pair arguments say: "+strings.Join(in.Pairs, ", ")+".", "")...)
	}
	if in.BucketConfig != "" || len(in.Pairs) > 0 {
		lines = append(lines, "")
	}
	lines = append(lines, wrap("Each value's comment names the flag or default it came from. Any other setting that is absent keeps sgl-router's default, which is also the router's.", "")...)
	if notes := notes(t); len(notes) > 0 {
		lines = append(lines, "", "Behaviour that differs from sgl-router:")
		for _, n := range notes {
			lines = append(lines, wrap(n, "  - ")...)
		}
	}
	return lines
}

// notes lists the deliberate changes of the target design (docs/design.md, Deliberate
// changes) that apply to this command line.
func notes(t *translator) []string {
	in, c := t.in, t.c
	var out []string
	policy := c.policyType()
	var checked []string
	if capacityChecked(policy) && c.dialect != DialectClassic {
		checked = append(checked, "--policy "+policy)
	}
	if c.pdMode() && c.dialect != DialectClassic {
		checked = append(checked, "decode")
	}
	if len(checked) > 0 {
		out = append(out, capacityNote(in, strings.Join(checked, " and ")))
	}
	if t.pendingBudget {
		out = append(out, "max_pending_prefill_tokens admits an engine while its waiting uncached tokens are below the cap; sgl-router admitted it while they plus the request's uncached tokens fitted (waiting + request <= cap), so a large request may now join a nearly full queue.")
	}
	if policy == "session_aware" && c.affinityMode == nil {
		out = append(out, "--affinity-mode was omitted, which sgl-router took as soft: an admitted backup engine could relieve a busy session's engine. session_aware always reuses the session's admitted binding, the former strict mode.")
	}
	bucketed := in.BucketConfig != "" || c.bucketConfig != nil
	if bucketed {
		out = append(out, "Buckets are tried in order of input capacity, then rank, then id, and a bucket's prefill and decode engines are chosen together; sgl-router ordered each stage's buckets by rank alone and chose them separately.")
		if t.estimated[sloTTFT] || t.estimated[sloTPS] {
			out = append(out, "SLO estimates: sgl-router ordered prefill buckets by ttft_p95_at_capacity_ms and decode buckets by tps_p05_at_capacity separately; here a bucket carries its prefill bucket's TTFT and its decode bucket's throughput as estimates.ttft_ms and estimates.tps, and one order counts one penalty per unmet preference, ties keeping the order above. A target header the router cannot read is answered 400 while its preference is enabled.")
		}
		out = append(out, t.sloNotes...)
		if policy == "cache_aware" || policy == "sticky" {
			out = append(out, "sgl-router looked for "+policy+" affinity across every bucket before the size buckets; here each bucket's policy looks among its own engines only.")
		}
	}
	if c.usesCacheAware() {
		out = append(out, prefixNote(in, c))
	}
	if c.dialect == DialectClassic {
		out = append(append(out, classicNotes(c)...), smgNotes(c)...)
	} else {
		out = append(out, experimentalNotes(c)...)
	}
	if t.tokenizerNote != "" {
		out = append(out, t.tokenizerNote)
	}
	var portless []string
	for _, w := range c.prefill {
		if w.port == nil {
			portless = append(portless, strings.TrimSpace("--prefill "+w.url+" "+w.arg))
		}
	}
	if len(portless) > 0 {
		out = append(out, "The classic router injected bootstrap_port: null into the requests of a prefill worker without a port ("+strings.Join(portless, ", ")+"); here such an engine has bootstrap_port 8998, SGLang's default --disaggregation-bootstrap-port: set bootstrap_port if it uses another.")
	}
	if len(c.duplicates) > 0 {
		out = append(out, "Workers listed more than once are one engine, as sgl-router de-duplicated its worker list after dropping trailing slashes: "+strings.Join(c.duplicates, ", ")+".")
	}
	return out
}

// capacityNote says how sgl-router's implicit capacity check before the picks of checked
// is kept: by the --engine-max-* caps given, with the flags still missing named.
func capacityNote(in Input, checked string) string {
	note := "sgl-router also checked each engine's reported capacity (running requests and KV tokens) before " + checked + " picks, against the engine's own limits. Admission caps are absolute here and do not come from the engines' reports."
	var given, missing []string
	if in.EngineMaxRunningRequests != nil {
		given = append(given, "max_running_requests (--engine-max-running-requests)")
	} else {
		missing = append(missing, "--engine-max-running-requests N (the engines' max_running_requests)")
	}
	if in.EngineMaxKVTokens != nil {
		given = append(given, "max_kv_tokens (--engine-max-kv-tokens)")
	} else {
		missing = append(missing, "--engine-max-kv-tokens N (the engines' max_total_num_tokens)")
	}
	if len(given) > 0 {
		note += " Those groups have " + strings.Join(given, " and ") + " as one cap for every engine."
	}
	if in.EngineMaxKVTokens != nil {
		note += " max_kv_tokens admits an engine while its KV tokens are below the cap; sgl-router also counted the request's input (num_total_tokens + input <= max_total_num_tokens)."
	}
	if len(missing) > 0 {
		note += " To keep the check, pass " + strings.Join(missing, " and ") + " to router migrate, before the --."
	}
	return note
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
