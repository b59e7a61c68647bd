package tui

import "testing"

func TestFormatTokens(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 950: "950", 1000: "1k", 12_345: "12.3k", 99_999: "100k", 500_000: "500k", 1_500_000: "1.5M", 2_000_000: "2M"} {
		if got := formatTokens(n); got != want {
			t.Errorf("formatTokens(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPrefixCell(t *testing.T) {
	for _, tt := range []struct {
		idx  []PrefixIndex
		want string
	}{
		{nil, "-"},
		{[]PrefixIndex{{Source: "local_index", Tokens: 10_240}}, "ev:10.2k"},
		{[]PrefixIndex{{Source: "approximate", Tokens: 33_600, CapacityTokens: 500_000}}, "ap:33.6k/500k"},
		{[]PrefixIndex{{Source: "local_index", Tokens: 0}, {Source: "approximate", Tokens: 16}}, "ev:0 ap:16"},
		{[]PrefixIndex{{Source: "local_index", Tokens: 1600}, {Source: "speculative", Tokens: 256}}, "ev:1.6k sp:256"},
		{[]PrefixIndex{{Source: "from_a_later_version", Tokens: 16}}, "-"},
	} {
		e := Engine{PrefixIndex: tt.idx}
		if got := e.prefixCell(); got != tt.want {
			t.Errorf("prefixCell(%+v) = %q, want %q", tt.idx, got, tt.want)
		}
	}
}
