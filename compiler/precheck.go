package compiler

import (
	"fmt"

	"cuelang.org/go/cue"

	"github.com/routerkit/router/runtime/plan"
)

// tuningOwner names the policy type each tuning field belongs to. Tuning under another
// policy is rejected rather than ignored.
var tuningOwner = map[string]plan.PolicyType{
	"fallback":               plan.Sticky,
	"min_matched_tokens":     plan.CacheAware,
	"min_match_ratio":        plan.CacheAware,
	"candidate_min_workers":  plan.CacheAware,
	"candidate_ratio":        plan.CacheAware,
	"candidate_max_workers":  plan.CacheAware,
	"switch_margin_tokens":   plan.CacheAware,
	"worker_queue_limit":     plan.CacheAware,
	"saturation_queue_floor": plan.CacheAware,
	"min_load_choices":       plan.CacheAware,
	"pressure_guard":         plan.CacheAware,
	"prefix_source":          plan.CacheAware,
}

// precheck reports what the schema can only call "not allowed" or "incomplete", with a
// message that says what to change: dropped options, a bucket's group shape, and tuning
// placed under a policy that does not use it.
func precheck(user cue.Value, errs *errorList) {
	checkValues(user, nil, errs)
	models, err := user.LookupPath(cue.MakePath(cue.Str("models"))).Fields()
	if err != nil {
		return
	}
	for models.Next() {
		buckets, err := models.Value().LookupPath(cue.MakePath(cue.Str("buckets"))).List()
		if err != nil {
			continue
		}
		for buckets.Next() {
			checkGroups(buckets.Value(), errs)
		}
	}
}

// checkGroups checks one bucket's groups: exactly one of plain or a complete pd pair.
func checkGroups(bucket cue.Value, errs *errorList) {
	groups := bucket.LookupPath(cue.MakePath(cue.Str("groups")))
	if !groups.Exists() {
		return // the schema reports the missing field
	}
	name := bucketName(bucket)
	plain := groups.LookupPath(cue.MakePath(cue.Str("plain")))
	pd := groups.LookupPath(cue.MakePath(cue.Str("pd")))
	switch {
	case plain.Exists() && pd.Exists():
		errs.at(pd.Pos(), pd.Path(), "bucket %s has both plain and pd groups: a bucket is plain or prefill/decode, never both; keep one", name)
	case !plain.Exists() && !pd.Exists():
		errs.at(groups.Pos(), groups.Path(), "bucket %s has no engine group: set groups.plain, or groups.pd with prefill and decode", name)
	}
	if plain.Exists() {
		checkTuning(plain, errs)
	}
	if pd.Exists() {
		for _, stage := range []string{"prefill", "decode"} {
			g := pd.LookupPath(cue.MakePath(cue.Str(stage)))
			if !g.Exists() {
				errs.at(pd.Pos(), pd.Path(), "bucket %s has half a prefill/decode pair: add pd.%s, or use groups.plain for a model without disaggregation", name, stage)
				continue
			}
			checkTuning(g, errs)
		}
	}
}

// checkTuning rejects tuning fields that belong to a policy other than the group's.
func checkTuning(group cue.Value, errs *errorList) {
	pol := group.LookupPath(cue.MakePath(cue.Str("policy")))
	typ := plan.PowerOfTwo
	if s, err := pol.LookupPath(cue.MakePath(cue.Str("type"))).String(); err == nil {
		typ = plan.PolicyType(s)
	}
	it, err := pol.Fields()
	if err != nil {
		return
	}
	for it.Next() {
		field := it.Selector().String()
		owner, ok := tuningOwner[field]
		if !ok || owner == typ {
			continue
		}
		v := it.Value()
		if field == "pressure_guard" && typ == plan.SessionAware {
			errs.at(v.Pos(), v.Path(), "%s", SessionPressureGuard.Message("pressure_guard", configVocabulary))
			continue
		}
		errs.at(v.Pos(), v.Path(), "%s is %s tuning but this policy is %s: remove it, or set type: %q", field, owner, typ, owner)
	}
}

// bucketName quotes a bucket's id for messages, or says it has none.
func bucketName(bucket cue.Value) string {
	if id, err := bucket.LookupPath(cue.MakePath(cue.Str("id"))).String(); err == nil {
		return fmt.Sprintf("%q", id)
	}
	return "(without id)"
}
