package compiler

import (
	"fmt"
	"math"

	"cuelang.org/go/cue"
)

// Dropped is an option of the legacy sgl-router that the target design removed on purpose
// (docs/design.md, Dropped options). The config compiler and the legacy command-line
// migrator (compiler/legacy) both reject it, and both explain why with Message, so an
// operator reads the same reasons whichever way the option reaches the router.
type Dropped int

// The dropped options. SessionPressureGuard is not an option of its own but a rejected
// use of one: pressure-guard tuning under session_aware, which lost its pressure escape.
const (
	FusedScore Dropped = iota
	ScorePolicy
	Fuse
	LegacyHostAffinity
	StablePair
	AffinityModeSoft
	PrefixCacheFilter
	PrefixCacheMinShare
	SessionPressureGuard
)

// Vocabulary spells, in one configuration language, the replacements that the messages
// of dropped options recommend.
type Vocabulary struct {
	// CacheAwareHitGate tells how to prefer prefix holders with the cache_aware policy and
	// its minimum-hit gate.
	CacheAwareHitGate string
	// DecodePowerOfTwo tells how to give decode selection the power_of_two policy.
	DecodePowerOfTwo string
}

// chooseOverScore is the advice for every part of the removed score composition.
const chooseOverScore = "choose cache_aware (prefix affinity with a load fallback) or load_based (least load)"

// Message explains that option, which is d as its user spelled it, is rejected and what to
// use instead, with the replacements spelled by v.
func (d Dropped) Message(option string, v Vocabulary) string {
	switch d {
	case FusedScore, ScorePolicy:
		return option + " was dropped: " + chooseOverScore
	case Fuse:
		return option + " was dropped with the fused_score and score_policy policies: remove it and " + chooseOverScore
	case LegacyHostAffinity:
		return option + " was dropped: decode groups use power_of_two; " + v.DecodePowerOfTwo
	case StablePair:
		return option + " was dropped: policies return one engine and there is no backup engine to pair; remove it (session_aware reuses the admitted binding of a session)"
	case AffinityModeSoft:
		return option + " was dropped: only strict admitted-binding reuse remains, which session_aware always does; remove it"
	case PrefixCacheFilter:
		return option + " was dropped, and the cache-aware hit gate is not its equivalent: remove it; to prefer prefix holders " + v.CacheAwareHitGate
	case PrefixCacheMinShare:
		return option + " was dropped with the prefix_cache filter, and the cache-aware hit gate is not its equivalent: remove it; to prefer prefix holders " + v.CacheAwareHitGate
	case SessionPressureGuard:
		return option + " applies to cache_aware selection only: session_aware reuses admitted bindings regardless of pressure; remove it"
	}
	panic(fmt.Sprintf("internal error: unknown dropped option %d", int(d)))
}

// configVocabulary spells replacements in the configuration language.
var configVocabulary = Vocabulary{
	CacheAwareHitGate: "use policy type cache_aware with min_matched_tokens or min_match_ratio",
	DecodePowerOfTwo:  `set type: "power_of_two"`,
}

// droppedFields maps an option the target design removed to the message that names what
// replaces it. A dropped option is an error wherever it appears: it is never accepted and
// ignored, so a config that uses one never half-loads.
var droppedFields = map[string]func(v cue.Value) string{
	"fuse": func(cue.Value) string {
		return Fuse.Message("fuse", configVocabulary)
	},
	"stable_pair": func(cue.Value) string {
		return StablePair.Message("stable_pair", configVocabulary)
	},
	"affinity_mode": func(v cue.Value) string {
		if s, err := v.String(); err == nil && s == "soft" {
			return AffinityModeSoft.Message(`affinity_mode "soft"`, configVocabulary)
		}
		return "affinity_mode was removed: session_aware always reuses admitted bindings (the former strict mode); remove it"
	},
	"prefix_cache_min_share": func(cue.Value) string {
		return PrefixCacheMinShare.Message("prefix_cache_min_share", configVocabulary)
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
			return PrefixCacheFilter.Message("the prefix_cache filter", configVocabulary)
		}
	}
	return "filters were replaced by admission caps: for the overloaded filter set policy.admission.max_inflight_requests and remove the filter"
}

// droppedPolicyTypes maps a removed policy type to its entry.
var droppedPolicyTypes = map[string]Dropped{
	"fused_score":          FusedScore,
	"score_policy":         ScorePolicy,
	"legacy_host_affinity": LegacyHostAffinity,
}

// checkValues walks the whole user value and reports, at their positions, every dropped
// option and every integer that does not fit the plan's 64-bit fields (CUE integers are
// unbounded, and decoding would otherwise fail without a position). The keys of models are
// names the user chose, not options, so a model may be called "fuse".
func checkValues(v cue.Value, path []cue.Selector, errs *errorList) {
	switch v.IncompleteKind() {
	case cue.IntKind:
		if _, err := v.Int64(); err != nil && v.IsConcrete() {
			errs.at(v.Pos(), cue.MakePath(path...), "%v is out of range: numbers here must fit in 64 bits (at most %d)", v, int64(math.MaxInt64))
		}
	case cue.StructKind:
		it, err := v.Fields()
		if err != nil {
			return
		}
		for it.Next() {
			sel, fv := it.Selector(), it.Value()
			fpath := append(path[:len(path):len(path)], sel)
			label := sel.String()
			modelName := len(path) == 1 && path[0].String() == "models"
			if msg, ok := droppedFields[label]; ok && !modelName {
				errs.at(fv.Pos(), cue.MakePath(fpath...), "%s", msg(fv))
				continue
			}
			if label == "type" && len(path) > 0 && path[len(path)-1].String() == "policy" {
				if s, err := fv.String(); err == nil {
					if d, ok := droppedPolicyTypes[s]; ok {
						errs.at(fv.Pos(), cue.MakePath(fpath...), "%s", d.Message(fmt.Sprintf("policy type %q", s), configVocabulary))
					}
				}
			}
			checkValues(fv, fpath, errs)
		}
	case cue.ListKind:
		it, err := v.List()
		if err != nil {
			return
		}
		for i := 0; it.Next(); i++ {
			checkValues(it.Value(), append(path[:len(path):len(path)], cue.Index(i)), errs)
		}
	}
}
