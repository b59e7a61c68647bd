package plan

import "testing"

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://10.0.0.7:8000":              "http://10.0.0.7:8000",
		"http://user:pass@10.0.0.7:8000/v1": "http://user:xxxxx@10.0.0.7:8000/v1",
		"https://tok3n@engine.internal":     "https://xxxxx@engine.internal",
		"http://user:p%40ss@h:1":            "http://user:xxxxx@h:1",
		"http://user:pass@h:1/\x7f":         "http://(unparsable, redacted)",
		"http://u:pa ss@[::1":               "http://(unparsable, redacted)",
		"http://user:@engine:8000":          "http://user:xxxxx@engine:8000",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
