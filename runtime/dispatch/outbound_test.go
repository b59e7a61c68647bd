package dispatch

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// The engine's URL is the engine's base path joined to the client's path with one
// slash, and a query parameter that does not parse is dropped rather than passed to an
// engine that might read it differently, as httputil.ReverseProxy does.
func TestOutboundURL(t *testing.T) {
	for _, tc := range []struct{ base, path, want string }{
		{"http://e:1", "/v1/chat/completions", "/v1/chat/completions"},
		{"http://e:1/", "/generate", "/generate"},
		{"http://e:1/base", "/generate", "/base/generate"},
		{"http://e:1/base/", "/generate", "/base/generate"},
		{"http://e:1/a%2Fb", "/x%2Fy", "/a%2Fb/x%2Fy"},
	} {
		base, _ := url.Parse(tc.base)
		in, _ := url.Parse(tc.path)
		path, raw := joinURLPath(base, in)
		got := (&url.URL{Path: path, RawPath: raw}).EscapedPath()
		if got != tc.want {
			t.Errorf("%s + %s = %s, want %s", tc.base, tc.path, got, tc.want)
		}
	}
	for query, want := range map[string]string{
		"":                "",
		"a=1&b=2":         "a=1&b=2",
		"a=1;b=2&c=3":     "c=3",
		"%zz=1&d=2":       "d=2",
		"q=%41&r=caf%C3%": "q=A",
	} {
		if got := cleanQuery(query); got != want {
			t.Errorf("cleanQuery(%q) = %q, want %q", query, got, want)
		}
	}
}

// An engine's headers share the client's values without room to grow into them: an Add
// to the engine's (a trace hook's, one PD half's) never writes into the client's, which
// the other half reads at the same time.
func TestOutboundSharesNoRoom(t *testing.T) {
	vals := make([]string, 2, 8)
	vals[0], vals[1] = "a", "b"
	in := http.Header{"X-Multi": vals, "Cookie": {"c"}}
	out := NewHeaderPolicy(plan.HeaderPolicy{}).Outbound(in, "id")
	out.Add("X-Multi", "from the engine's side")
	if spare := vals[:3][2]; spare != "" {
		t.Errorf("an Add to the engine's headers wrote %q into the client's", spare)
	}
	if got := out["X-Multi"]; len(got) != 3 || got[0] != "a" || got[1] != "b" {
		t.Errorf("engine's X-Multi %q", got)
	}
	if out.Get("Cookie") != "" || out.Get("X-Request-Id") != "id" {
		t.Errorf("engine's headers %v", out)
	}
}
