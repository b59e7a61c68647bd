package tui

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	st, err := Decode([]byte(`{"engines": [{"id": "E1", "from_the_future": [1, 2]}], "later": {}}`))
	if err != nil {
		t.Fatalf("unknown fields: %v", err)
	}
	e := st.Engines[0]
	if e.ID != "E1" || e.Healthy || e.Load != nil || e.Groups != nil || len(st.Buckets) != 0 {
		t.Errorf("missing fields are not zero: %+v", st)
	}
	for _, bad := range []string{``, `[]`, `null`, `{"engines": {"id": "E1"}}`, `{"engines": [{"inflight": "many"}]}`, `{"time": "yesterday"}`} {
		if _, err := Decode([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

// TestMalformedNeverCrashes feeds the model snapshots that decode but make no sense: it
// must render them, not panic.
func TestMalformedNeverCrashes(t *testing.T) {
	odd := []string{
		`{}`,
		`{"engines": [{}], "buckets": [{}], "decisions": [{}]}`,
		`{"engines": [{"id": "E1", "healthy": true, "load": {"running": -5, "waiting": -1, "native": true, "max_kv_tokens": -1, "max_running": -3}, "report_age_ms": 1e300}]}`,
		`{"engines": [{"id": "E1", "groups": ["", "/", "a/b/c"]}, {"id": "E1"}], "uptime_s": -1}`,
		`{"buckets": [{"id": "b", "by_status": {"": 1, "5": -2}}], "decisions": [{"engines": {"": ""}, "reasons": {"x": ""}, "time": "1970-01-01T00:00:00Z"}]}`,
	}
	for _, s := range odd {
		st, err := Decode([]byte(s))
		if err != nil {
			t.Fatalf("Decode(%s): %v", s, err)
		}
		m := update(New(Options{}), resultMsg{state: st, at: t0}, resultMsg{state: st, at: t0})
		for _, k := range []string{"tab", "tab", "tab", "s", "s", "s", "s", "s", "s", "s"} {
			m = update(m, keys(k)...)
			checkFits(t, m.View().Content, defaultWidth, 0)
		}
	}
}
