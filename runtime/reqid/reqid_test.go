package reqid

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestFrom(t *testing.T) {
	long := strings.Repeat("a", MaxLen)
	tests := []struct {
		name     string
		headers  []string // configured; nil = defaults
		sent     map[string]string
		want     string // "" = a generated id
		replaced bool
	}{
		{name: "x-request-id", sent: map[string]string{"X-Request-Id": "abc-1"}, want: "abc-1"},
		{name: "order wins over presence", sent: map[string]string{"X-Trace-Id": "t1", "X-Correlation-Id": "c1"}, want: "c1"},
		{name: "last default", sent: map[string]string{"Request-Id": "r1"}, want: "r1"},
		{name: "none", sent: map[string]string{"X-Other": "o"}},
		{name: "configured header only", headers: []string{"x-amzn-trace-id"}, sent: map[string]string{"X-Request-Id": "no", "X-Amzn-Trace-Id": "Root=1-2"}, replaced: true},
		{name: "configured header valid", headers: []string{"X-My-Id"}, sent: map[string]string{"X-Request-Id": "no", "X-My-Id": "mine:1.2_3"}, want: "mine:1.2_3"},
		{name: "longest", sent: map[string]string{"X-Request-Id": long}, want: long},
		{name: "too long", sent: map[string]string{"X-Request-Id": long + "a"}, replaced: true},
		{name: "log forging", sent: map[string]string{"X-Request-Id": "a\" level=ERROR msg=x"}, replaced: true},
		{name: "empty", sent: map[string]string{"X-Request-Id": ""}, replaced: true},
		{name: "hostile first does not fall through", sent: map[string]string{"X-Request-Id": "a b", "X-Correlation-Id": "c1"}, replaced: true},
	}
	gen := regexp.MustCompile(`^chatcmpl-[A-Za-z0-9]{24}$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			for k, v := range tt.sent {
				r.Header[k] = []string{v}
			}
			got, replaced := NewReader(tt.headers).From(r)
			if replaced != tt.replaced {
				t.Errorf("replaced = %v, want %v", replaced, tt.replaced)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("id = %q, want %q", got, tt.want)
			}
			if tt.want == "" && !gen.MatchString(got) {
				t.Errorf("id = %q, want a generated chat id", got)
			}
		})
	}
}

func TestNewFormat(t *testing.T) {
	tests := []struct{ path, prefix string }{
		{"/v1/chat/completions", "chatcmpl-"},
		{"/v1/completions", "cmpl-"},
		{"/generate", "gnt-"},
		{"/v1/embeddings", "req-"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			re := regexp.MustCompile("^" + tt.prefix + "[A-Za-z0-9]{24}$")
			seen := map[string]bool{}
			for range 1000 {
				id := New(tt.path)
				if !re.MatchString(id) || !Valid(id) {
					t.Fatalf("New(%q) = %q, want %s and 24 letters or digits", tt.path, id, tt.prefix)
				}
				if seen[id] {
					t.Fatalf("New(%q) repeated %q", tt.path, id)
				}
				seen[id] = true
			}
		})
	}
}

// TestNewUsesAlphabet checks that the random part reaches every character of the
// alphabet: a generator stuck on a few would still match the format.
func TestNewUsesAlphabet(t *testing.T) {
	seen := map[byte]bool{}
	for range 200 {
		id := New("/x")
		for i := len("req-"); i < len(id); i++ {
			seen[id[i]] = true
		}
	}
	if len(seen) != len(alphabet) {
		t.Errorf("random parts used %d characters of %d", len(seen), len(alphabet))
	}
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		_ = New("/v1/chat/completions")
	}
}
