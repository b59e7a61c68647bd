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
	"--cache-prefix-provider", "radix_tree",
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
	running, kv := ptr(int64(256)), ptr(int64(1<<20))
	pending := bucketFileOf(t, `{"buckets": [{"id": "b", "stage": "prefill", "rank": 0, "worker_ids": [], "max_pending_prefill_tokens": 4096}]}`)
	tests := []struct {
		name      string
		in        Input
		want, not []string
	}{
		{"round_robin had no capacity check", Input{Args: with(plainFleet, "--policy", "round_robin")}, nil, []string{"capacity"}},
		{"power_of_two had one", Input{Args: with(plainFleet, "--policy", "power_of_two")}, []string{"before --policy power_of_two picks",
			"To keep the check, pass --engine-max-running-requests N (the engines' max_running_requests) and --engine-max-kv-tokens N (the engines' max_total_num_tokens) to router migrate, before the --."}, nil},
		{"decode had one", Input{Args: with(pdFleet, "--policy", "random")}, []string{"before decode picks", "pass --engine-max-running-requests N"}, nil},
		{"both capacity flags keep the check", Input{Args: with(plainFleet, "--policy", "cache_aware"), EngineMaxRunningRequests: running, EngineMaxKVTokens: kv},
			[]string{"before --policy cache_aware picks", "Those groups have max_running_requests (--engine-max-running-requests) and max_kv_tokens (--engine-max-kv-tokens) as one cap for every engine",
				"sgl-router also counted the request's input (num_total_tokens + input <= max_total_num_tokens)"},
			[]string{"To keep the check"}},
		{"one capacity flag names the other", Input{Args: with(plainFleet, "--policy", "session_aware"), EngineMaxRunningRequests: running},
			[]string{"max_running_requests (--engine-max-running-requests) as one cap", "To keep the check, pass --engine-max-kv-tokens N (the engines' max_total_num_tokens) to router migrate"},
			[]string{"pass --engine-max-running-requests", "num_total_tokens + input"}},
		{"a pending-prefill budget changed meaning", Input{Args: with(plainFleet, "--policy", "random"), BucketConfig: pending},
			[]string{"max_pending_prefill_tokens admits an engine while its waiting uncached tokens are below the cap; sgl-router admitted it while they plus the request's uncached tokens fitted (waiting + request <= cap)"}, nil},
		{"no pending-prefill budget, no note", Input{Args: with(plainFleet, "--policy", "random")}, nil, []string{"max_pending_prefill_tokens"}},
		{"omitted affinity mode was soft", Input{Args: with(plainFleet, "--policy", "session_aware")}, []string{"--affinity-mode was omitted"}, nil},
		{"strict affinity mode is unchanged", Input{Args: with(plainFleet, "--policy", "session_aware", "--affinity-mode", "strict")}, nil, []string{"--affinity-mode was omitted"}},
		{"the local index needs KV events", Input{Args: with(plainFleet, "--policy", "cache_aware"), EnginesPublishKVEvents: true}, []string{"kv_events"}, []string{"approximate"}},
		{"the approximate index by default", Input{Args: with(plainFleet, "--policy", "cache_aware")},
			[]string{"The prefix index is approximate", "--engines-publish-kv-events"}, []string{"kv_events:", "--cache-threshold"}},
		{"the classic ratio gate", Input{Args: with(plainFleet, "--policy", "cache_aware", "--cache-threshold", "0.5")},
			[]string{"--cache-threshold compared matched characters"}, nil},
		{"other policies have no index", Input{Args: with(plainFleet, "--policy", "power_of_two")}, nil, []string{"kv_events"}},
		// The classic router injected bootstrap_port: null for `none` or no port.
		{"prefill workers without a bootstrap port", Input{Args: []string{"--model-id", "m", "--prefill", "http://p1", "none", "--prefill", "http://p2", "--prefill", "http://p3", "9001", "--decode", "http://d"}},
			[]string{"The classic router injected bootstrap_port: null into the requests of a prefill worker without a port (--prefill http://p1 none, --prefill http://p2); here such an engine has bootstrap_port 8998"},
			[]string{"http://p3"}},
		{"every prefill worker with a port", Input{Args: []string{"--model-id", "m", "--prefill", "http://p1", "9001", "--decode", "http://d"}}, nil, []string{"bootstrap_port: null"}},
		{"a repeated worker", Input{Args: with(plainFleet, "--worker-urls", "http://10.0.0.1:30000/")},
			[]string{"Workers listed more than once are one engine, as sgl-router de-duplicated its worker list after dropping trailing slashes: --worker-urls http://10.0.0.1:30000/ (the same worker as http://10.0.0.1:30000)."}, nil},
		{"no repeated worker", Input{Args: plainFleet}, nil, []string{"more than once"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, _, err := Migrate(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			header := notesOf(src)
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

// notesOf is the text of a migrated configuration's header after the quoted command line,
// with the comment markers and line breaks gone.
func notesOf(src []byte) string {
	head, _, _ := strings.Cut(string(src), "\nengines")
	_, head, _ = strings.Cut(head, "Each value's comment names")
	var words []string
	for _, w := range strings.Fields(head) {
		if w != "//" {
			words = append(words, w)
		}
	}
	return strings.Join(words, " ")
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
