package legacy

import (
	"strings"
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"
)

// everything is a command line that sets a value through every kind of flag.
var everything = []string{"--model-id", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port", "8000",
	"--prefill", "http://p1:30000", "9001", "--prefill", "http://p2:30000",
	"--decode", "http://d1:30000", "--decode-policy", "power_of_two",
	"--policy", "cache_aware", "--filter", "overloaded", "--max-in-flight", "32",
	"--kv-indexer-endpoint", "grpc://indexer:50051", "--kv-indexer-query-timeout-ms", "50",
	"--cache-affinity-min-matched-tokens", "512", "--cache-affinity-min-match-ratio", "0.5",
	"--cache-candidate-ratio", "0.25", "--worker-queue-limit", "8", "--saturation-queue-floor", "2",
	"--pressure-rel-threshold", "1.25", "--min-load-choices", "3"}

// The output is CUE's own formatting, and every value in it carries a comment that names
// where it came from.
func TestOutputIsFormattedAndCommented(t *testing.T) {
	src, _, err := Migrate(Input{Args: everything})
	if err != nil {
		t.Fatal(err)
	}
	formatted, err := format.Source(src)
	if err != nil || string(formatted) != string(src) {
		t.Errorf("output is not formatted (%v):\n%s", err, src)
	}
	f, err := parser.ParseFile("migrated.cue", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	ast.Walk(f, func(n ast.Node) bool {
		fld, ok := n.(*ast.Field)
		if !ok {
			return true
		}
		if _, isStruct := fld.Value.(*ast.StructLit); isStruct {
			return true
		}
		if _, isList := fld.Value.(*ast.ListLit); isList && fld.Label.(*ast.Ident).Name == "engines" {
			return true
		}
		if len(ast.Comments(fld)) == 0 {
			t.Errorf("%v has no comment naming its flag", fld.Label)
		}
		return true
	}, nil)
	for _, want := range []string{
		"sgl-router --model-id Qwen/Qwen3-8B --host 0.0.0.0",
		"max_inflight_requests: 32 // --filter overloaded --max-in-flight",
		"0.5  // --cache-affinity-min-match-ratio",
		`bootstrap_port: 9001              // --prefill http://p1:30000 9001`,
		"Behaviour that differs from sgl-router:",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("want %q in:\n%s", want, src)
		}
	}
}

func TestHeaderQuotesTheCommandLine(t *testing.T) {
	// A quote is a header-name character (an RFC 9110 token character).
	src, _, err := Migrate(Input{Args: with(plainFleet, "--policy", "session_aware", "--session-id-header", "x-it's")})
	if err != nil {
		t.Fatal(err)
	}
	if want := `--session-id-header 'x-it'\''s'`; !strings.Contains(string(src), want) {
		t.Errorf("want %s in the header:\n%s", want, src)
	}
	got := shellJoin([]string{"--session-id-header", "x session", "it's", ""})
	if want := `--session-id-header 'x session' 'it'\''s' ''`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// The header names each deliberate change of behaviour that applies, and no other.
func TestNotes(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		want, not []string
	}{
		{"round_robin had no capacity check", with(plainFleet, "--policy", "round_robin"), nil, []string{"capacity"}},
		{"power_of_two had one", with(plainFleet, "--policy", "power_of_two"), []string{"before --policy power_of_two picks"}, nil},
		{"decode had one", with(pdFleet, "--policy", "random"), []string{"before decode picks"}, nil},
		{"omitted affinity mode was soft", with(plainFleet, "--policy", "session_aware"), []string{"--affinity-mode was omitted"}, nil},
		{"strict affinity mode is unchanged", with(plainFleet, "--policy", "session_aware", "--affinity-mode", "strict"), nil, []string{"--affinity-mode was omitted"}},
		{"the local index needs KV events", with(plainFleet, "--policy", "cache_aware"), []string{"kv_events"}, nil},
		{"a remote indexer does not", with(plainFleet, "--policy", "cache_aware", "--kv-indexer-endpoint", "http://i:1"), nil, []string{"kv_events"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, _, err := Migrate(Input{Args: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			header := strings.Join(strings.Fields(string(src[:strings.Index(string(src), "\nengines")])), " ")
			for _, w := range tt.want {
				if !strings.Contains(header, w) {
					t.Errorf("want %q in:\n%s", w, src)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(header, n) {
					t.Errorf("want no %q in:\n%s", n, src)
				}
			}
		})
	}
}

func TestWrap(t *testing.T) {
	got := wrap(strings.Repeat("word ", 40), "  - ")
	if len(got) < 2 || !strings.HasPrefix(got[0], "  - word") || !strings.HasPrefix(got[1], "    word") {
		t.Fatalf("got %q", got)
	}
	for _, l := range got {
		if len(l) > 88 {
			t.Errorf("line longer than 88 columns: %q", l)
		}
	}
}
