package legacy

import (
	"fmt"
	"slices"
	"strings"
)

// pair is one --pair PREFILL=DECODE: the operator's explicit association of a legacy
// prefill bucket and decode bucket into one prefill/decode bucket. Pairs are never
// inferred from ranks or names (docs/design.md, Where the router differs).
type pair struct {
	prefill, decode string
}

func (p pair) String() string { return p.prefill + "=" + p.decode }

// bucketID names the bucket a pair becomes after both of its halves.
func (p pair) bucketID() string { return p.prefill + "+" + p.decode }

// parsePairs reads the --pair arguments.
func parsePairs(args []string) ([]pair, Errors) {
	var pairs []pair
	var errs Errors
	for _, a := range args {
		p, d, ok := strings.Cut(a, "=")
		if !ok || p == "" || d == "" {
			errs.addf("--pair %q: want PREFILL_BUCKET=DECODE_BUCKET, two bucket ids of the bucket file", a)
			continue
		}
		pairs = append(pairs, pair{p, d})
	}
	return pairs, errs
}

// fileBuckets translates the buckets of a legacy bucket file. A prefill bucket serves plain
// workers in a plain fleet, as it did in sgl-router. In a prefill/decode fleet every
// bucket of the configuration is a complete pair: from --pair, or, when the file has no
// decode buckets, a prefill bucket with every decode worker, which is what sgl-router did
// for a stage without buckets.
func (t *translator) fileBuckets(f *bucketFile, pairs []pair) ([]*node, Errors) {
	prefills, decodes := f.specs(stagePrefill), f.specs(stageDecode)
	var errs Errors
	var out []*node
	add := func(b *node, e Errors) {
		out = append(out, b)
		errs = append(errs, e...)
	}
	switch {
	case !t.c.pdMode():
		errs.check(len(pairs) == 0, "--pair joins prefill and decode buckets, but the workers are plain (--worker-urls): remove --pair")
		for _, d := range decodes {
			errs.addf("%s: decode bucket %q has no decode workers to hold (--worker-urls lists plain workers): remove it", f.name, *d.ID)
		}
		for _, p := range prefills {
			add(t.bucket(f, p, nil))
		}
	case len(decodes) == 0:
		errs.check(len(pairs) == 0, "--pair: %s has no decode buckets to pair with: each prefill bucket keeps every decode worker, as in sgl-router; remove --pair", f.name)
		for _, p := range prefills {
			add(t.bucket(f, p, nil))
		}
	default:
		errs = append(errs, checkPairs(f, pairs, prefills, decodes)...)
		if len(errs) > 0 {
			return nil, errs
		}
		for _, pr := range pairs {
			add(t.bucket(f, find(prefills, pr.prefill), find(decodes, pr.decode)))
		}
	}
	return out, errs
}

// checkPairs checks that every pair joins a prefill and a decode bucket of the file, once,
// and that every bucket of the file is in a pair.
func checkPairs(f *bucketFile, pairs []pair, prefills, decodes []*bucketSpec) Errors {
	var errs Errors
	seen := map[pair]bool{}
	paired := map[string]bool{}
	pairOf := map[string]pair{}
	for _, pr := range pairs {
		errs.check(!seen[pr], "--pair %s is given more than once", pr)
		if !seen[pr] {
			// A bucket in two pairs would need two partners of its own rank, and ranks are
			// unique per stage.
			for _, key := range []string{stagePrefill + "/" + pr.prefill, stageDecode + "/" + pr.decode} {
				if other, ok := pairOf[key]; ok {
					stage, id, _ := strings.Cut(key, "/")
					errs.addf("--pair %s: %s bucket %q is already in --pair %s: each bucket is in one pair, since a pair's two ranks are equal and ranks are unique per stage", pr, stage, id, other)
				}
				pairOf[key] = pr
			}
		}
		seen[pr] = true
		for _, side := range []struct {
			id, stage string
			specs     []*bucketSpec
		}{{pr.prefill, stagePrefill, prefills}, {pr.decode, stageDecode, decodes}} {
			if find(side.specs, side.id) == nil {
				errs.addf("--pair %s: %s has no %s bucket %q (%s buckets: %s)", pr, f.name, side.stage, side.id, side.stage, ids(side.specs))
			}
			paired[side.stage+"/"+side.id] = true
		}
	}
	var unpaired []string
	for _, s := range append(slices.Clone(prefills), decodes...) {
		if !paired[*s.Stage+"/"+*s.ID] {
			unpaired = append(unpaired, fmt.Sprintf("%s bucket %q", *s.Stage, *s.ID))
		}
	}
	if len(unpaired) > 0 {
		errs.addf("%s has unpaired buckets: %s; a prefill/decode bucket needs both stages, and migrate never guesses which belong together: add --pair PREFILL=DECODE for each (prefill buckets: %s; decode buckets: %s)",
			f.name, strings.Join(unpaired, ", "), ids(prefills), ids(decodes))
	}
	return errs
}

// bucket translates prefill spec p, with decode spec d when p is paired, into one bucket.
// A legacy prefill bucket bounded the input length by its extend range and by its
// context, which it compared with the input alone; both become the input range. A decode
// bucket's context held the input plus the requested output, which is what
// max_context_tokens means in the configuration.
func (t *translator) bucket(f *bucketFile, p, d *bucketSpec) (*node, Errors) {
	var errs Errors
	at := func(s *bucketSpec, field string) string { return fmt.Sprintf("%s: %s.%s", f.name, *s.ID, field) }
	b := &node{}
	if d == nil {
		b.set("id", *p.ID, at(p, "id"))
		b.set("rank", int64(*p.Rank), at(p, "rank"))
	} else {
		pr := pair{*p.ID, *d.ID}
		b.set("id", pr.bucketID(), "--pair "+pr.String())
		errs.check(*p.Rank == *d.Rank, "--pair %s: prefill rank %d and decode rank %d differ, and a bucket has one rank: give both buckets the same rank in %s", pr, *p.Rank, *d.Rank, f.name)
		b.set("rank", int64(*p.Rank), fmt.Sprintf("%s: %s.rank and %s.rank", f.name, *p.ID, *d.ID))
	}

	minInput := int64(0)
	if p.MinExtendTokens != nil {
		minInput = int64(*p.MinExtendTokens)
		b.child("limits").set("min", minInput, at(p, "min_extend_tokens"))
	}
	if maxInput, field, from := inputBound(p, at); field != "" {
		b.child("limits").set("max", maxInput, from)
		errs.check(minInput <= maxInput, "%s: bucket %q takes no request: its %s (%d) is below its min_extend_tokens (%d)", f.name, *p.ID, field, maxInput, minInput)
	}
	if d != nil && d.MaxContextTokens != nil {
		ctx := int64(*d.MaxContextTokens)
		b.set("max_context_tokens", ctx, at(d, "max_context_tokens"))
		errs.check(ctx >= minInput, "--pair %s=%s takes no request: decode max_context_tokens (%d) is below prefill min_extend_tokens (%d)", *p.ID, *d.ID, ctx, minInput)
	}

	t.estimates(b, f, p, d, at)

	var caps []admissionCap
	if p.MaxPendingPrefillTokens != nil {
		t.pendingBudget = true
		caps = append(caps, admissionCap{"max_pending_prefill_tokens", int64(*p.MaxPendingPrefillTokens), at(p, "max_pending_prefill_tokens")})
	}
	role := "plain"
	if t.c.pdMode() {
		role = stagePrefill
	}
	members, e := t.members(f, p, role)
	errs = append(errs, e...)
	selection := group(members, at(p, "worker_ids"), t.selectionPolicy(caps))
	groups := b.child("groups")
	if !t.c.pdMode() {
		groups.set("plain", selection, "")
		return b, errs
	}
	pd := groups.child("pd")
	pd.set("prefill", selection, "")
	if d == nil {
		pd.set("decode", group(nil, "", t.decodeSelection()), f.name+" has no decode buckets: every decode worker, as in sgl-router")
		return b, errs
	}
	members, e = t.members(f, d, stageDecode)
	errs = append(errs, e...)
	pd.set("decode", group(members, at(d, "worker_ids"), t.decodeSelection()), "")
	return b, errs
}

// inputBound is the upper bound of a prefill bucket's input range, the bucket field it came
// from and the comment saying so; field is empty when the bucket has none. The file's
// values fit int64: targetRules refused larger ones.
func inputBound(p *bucketSpec, at func(*bucketSpec, string) string) (n int64, field, from string) {
	ext, ctx := p.MaxExtendTokens, p.MaxContextTokens
	switch {
	case ext != nil && (ctx == nil || *ext <= *ctx):
		return int64(*ext), "max_extend_tokens", at(p, "max_extend_tokens")
	case ctx != nil:
		return int64(*ctx), "max_context_tokens", at(p, "max_context_tokens") + ", which sgl-router compared with the input length of a prefill bucket"
	}
	return 0, "", ""
}

// members maps a spec's worker URLs to the engine ids of the configuration; every worker
// must be one of the command line's, of the spec's role.
func (t *translator) members(f *bucketFile, s *bucketSpec, role string) ([]string, Errors) {
	var errs Errors
	ids := []string{}
	for _, u := range *s.WorkerIDs {
		w, ok := t.workers[normalizeURL(u)]
		switch {
		case !ok:
			errs.addf("%s: bucket %q lists worker %s, which the command line does not give: the configuration lists its engines, so add it with %s", f.name, *s.ID, u, roleFlag(role))
		case w.role != role:
			errs.addf("%s: bucket %q lists worker %s, a %s worker (%s), but its workers are %s workers (%s)", f.name, *s.ID, u, w.role, w.flag, role, roleFlag(role))
		default:
			ids = append(ids, w.id)
		}
	}
	return ids, errs
}

func roleFlag(role string) string {
	switch role {
	case stagePrefill:
		return "--prefill"
	case stageDecode:
		return "--decode"
	}
	return "--worker-urls"
}

func find(specs []*bucketSpec, id string) *bucketSpec {
	for _, s := range specs {
		if *s.ID == id {
			return s
		}
	}
	return nil
}

func ids(specs []*bucketSpec) string {
	if len(specs) == 0 {
		return "none"
	}
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = *s.ID
	}
	return strings.Join(out, ", ")
}

// estimates carries a bucket's SLO estimates over: the TTFT of its prefill spec and the
// throughput of its decode spec, which were each stage's estimates in sgl-router. It
// records which estimates the file gives, since a preference without one is left off.
// The values fit: targetRules refused larger and non-positive ones.
func (t *translator) estimates(b *node, f *bucketFile, p, d *bucketSpec, at func(*bucketSpec, string) string) {
	if p.TTFTP95AtCapacityMS != nil {
		b.child("estimates").set("ttft_ms", int64(*p.TTFTP95AtCapacityMS), at(p, "ttft_p95_at_capacity_ms"))
		t.estimated[sloTTFT] = true
	}
	if d != nil && d.TPSP05AtCapacity != nil {
		b.child("estimates").set("tps", *d.TPSP05AtCapacity, at(d, "tps_p05_at_capacity"))
		t.estimated[sloTPS] = true
	}
}
