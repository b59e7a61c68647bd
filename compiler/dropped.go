package compiler

import "cuelang.org/go/cue"

// droppedFields maps an option the target design removed to the message that names what
// replaces it. A dropped option is an error wherever it appears: it is never accepted and
// ignored, so a config that uses one never half-loads.
var droppedFields = map[string]func(v cue.Value) string{
	"fuse": func(cue.Value) string {
		return "fuse was dropped with the fused_score and score_policy policies: remove it and choose a policy type (cache_aware for prefix affinity with a load fallback, load_based for least load)"
	},
	"stable_pair": func(cue.Value) string {
		return "stable_pair was dropped: policies return one engine and there is no backup engine to pair; remove it (session_aware reuses the admitted binding of a session)"
	},
	"affinity_mode": func(v cue.Value) string {
		if s, err := v.String(); err == nil && s == "soft" {
			return `affinity_mode "soft" was dropped: only strict admitted-binding reuse remains, which session_aware always does; remove affinity_mode`
		}
		return "affinity_mode was removed: session_aware always reuses admitted bindings (the former strict mode); remove it"
	},
	"prefix_cache_min_share": func(cue.Value) string {
		return "prefix_cache_min_share was dropped with the prefix_cache filter, and the cache-aware hit gate is not its equivalent: remove it; to prefer prefix holders use policy type cache_aware with min_matched_tokens or min_match_ratio"
	},
	"filter":  filterMessage,
	"filters": filterMessage,
}

// filterMessage explains the legacy hard filters: prefix_cache is dropped, overloaded
// became an admission cap.
func filterMessage(v cue.Value) string {
	var kinds []string
	_ = v.Decode(&kinds)
	for _, k := range kinds {
		if k == "prefix_cache" {
			return "the prefix_cache filter was dropped, and the cache-aware hit gate is not its equivalent: remove it; to prefer prefix holders use policy type cache_aware with min_matched_tokens or min_match_ratio"
		}
	}
	return "filters were replaced by admission caps: for the overloaded filter set policy.admission.max_inflight_requests and remove the filter"
}

// droppedPolicyTypes maps a removed policy type to its replacement.
var droppedPolicyTypes = map[string]string{
	"fused_score":          `policy type "fused_score" was dropped: choose cache_aware (prefix affinity with a load fallback) or load_based (least load)`,
	"score_policy":         `policy type "score_policy" was dropped: choose cache_aware (prefix affinity with a load fallback) or load_based (least load)`,
	"legacy_host_affinity": `policy type "legacy_host_affinity" was dropped: decode groups use power_of_two; set type: "power_of_two"`,
}

// checkDropped walks the whole user value and reports every dropped option at its
// position.
func checkDropped(v cue.Value, path []cue.Selector, errs *errorList) {
	switch v.IncompleteKind() {
	case cue.StructKind:
		it, err := v.Fields()
		if err != nil {
			return
		}
		for it.Next() {
			sel, fv := it.Selector(), it.Value()
			fpath := append(path[:len(path):len(path)], sel)
			label := sel.String()
			if msg, ok := droppedFields[label]; ok {
				errs.at(fv.Pos(), cue.MakePath(fpath...), "%s", msg(fv))
				continue
			}
			if label == "type" && len(path) > 0 && path[len(path)-1].String() == "policy" {
				if s, err := fv.String(); err == nil {
					if msg, ok := droppedPolicyTypes[s]; ok {
						errs.at(fv.Pos(), cue.MakePath(fpath...), "%s", msg)
					}
				}
			}
			checkDropped(fv, fpath, errs)
		}
	case cue.ListKind:
		it, err := v.List()
		if err != nil {
			return
		}
		for i := 0; it.Next(); i++ {
			checkDropped(it.Value(), append(path[:len(path):len(path)], cue.Index(i)), errs)
		}
	}
}
