package main

import (
	"slices"
	"testing"
)

func TestRouterSpecs(t *testing.T) {
	for _, tt := range []struct {
		name                        string
		policies, tokenizers, extra string
		want                        []routerSpec
	}{
		{"the default run", "round_robin,cache_aware", "standin", "cache_aware:testdata/tokenizers/qwen3",
			[]routerSpec{{"round_robin", ""}, {"cache_aware", ""}, {"cache_aware", "testdata/tokenizers/qwen3"}}},
		{"an extra already listed", "power_of_two", "standin,q", "power_of_two:q",
			[]routerSpec{{"power_of_two", ""}, {"power_of_two", "q"}}},
		{"no extra", "round_robin", "standin", "",
			[]routerSpec{{"round_robin", ""}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := routerSpecs(tt.policies, tt.tokenizers, tt.extra)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"cache_aware", ":q", "cache_aware:"} {
		if got, err := routerSpecs("round_robin", "standin", bad); err == nil {
			t.Errorf("-extra-routers %q accepted as %v", bad, got)
		}
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"-extra-routers", "", "-router-flags", "--log-level warn", "-x", "it's"})
	want := `-extra-routers '' -router-flags '--log-level warn' -x 'it'\''s'`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
