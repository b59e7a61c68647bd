package compiler

import (
	"strings"
	"testing"
)

// Every dropped option has a message that starts with the option as its user wrote it and
// spells the recommended replacements in the caller's language.
func TestDroppedMessages(t *testing.T) {
	flags := Vocabulary{CacheAwareHitGate: "use --policy cache_aware", DecodePowerOfTwo: "remove --decode-policy"}
	for d := FusedScore; d <= SessionPressureGuard; d++ {
		for _, v := range []Vocabulary{configVocabulary, flags} {
			msg := d.Message("OPTION", v)
			if !strings.HasPrefix(msg, "OPTION ") || strings.ContainsAny(msg, "{}") {
				t.Errorf("%d: %q", d, msg)
			}
		}
	}
	if got := PrefixCacheFilter.Message("--filter prefix_cache", flags); !strings.HasSuffix(got, "to prefer prefix holders use --policy cache_aware") {
		t.Errorf("the vocabulary spells the replacement: %q", got)
	}
	if got := LegacyHostAffinity.Message("x", configVocabulary); !strings.HasSuffix(got, `set type: "power_of_two"`) {
		t.Errorf("the config vocabulary spells the replacement: %q", got)
	}
}
