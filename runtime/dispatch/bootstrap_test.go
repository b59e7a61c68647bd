package dispatch

import (
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/engine"
	"github.com/routerkit/router/runtime/plan"
	"github.com/routerkit/router/runtime/strictjson"
)

// FuzzBootstrap: a JSON object the strict decoder accepts gets bootstrap fields that leave
// valid JSON with the router's values and every other key as the client sent it.
func FuzzBootstrap(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"bootstrap_room":7}`,
		`{ "model" : "m" , "messages" : [ ] }`, `{}`, `{"model":"m","max_tokens":1,"max_tokens":2}`,
		`{"model":"m","messages":[{"role":"user","content":"\u00e9<&>"}],"stream":true,"n":2}`,
	} {
		f.Add([]byte(s))
	}
	pre := engine.New(plan.Engine{ID: "P1", URL: "http://127.0.0.1:1", BootstrapPort: 8998})
	f.Fuzz(func(t *testing.T, body []byte) {
		var top map[string]json.RawMessage
		if strictjson.Unmarshal(body, &top) != nil || top == nil {
			return // a body the router refuses before dispatch
		}
		pl, err := withBootstrap(body, pre, 42, 0)
		if err != nil {
			t.Fatalf("bootstrap on an accepted body: %v", err)
		}
		out := append(append([]byte{}, pl.head...), pl.tail...)
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("bootstrap body is not JSON: %v\n%s", err, out)
		}
		if string(got["bootstrap_room"]) != "42" || string(got["bootstrap_port"]) != "8998" {
			t.Fatalf("bootstrap fields: %s", out)
		}
		for k, v := range top {
			if len(k) > 10 && k[:10] == "bootstrap_" {
				continue
			}
			var a, b any
			_ = json.Unmarshal(v, &a)
			_ = json.Unmarshal(got[k], &b)
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Fatalf("key %q changed: %s -> %s", k, v, got[k])
			}
		}
	})
}

// largeChat is a chat request of about size bytes.
func largeChat(size int) []byte {
	return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("word ", size/5) + `"}], "max_tokens": 4}`)
}

// Defect 7: the PD bootstrap fields are added without copying the body.
func TestBootstrapMemory(t *testing.T) {
	body := largeChat(8 << 20)
	pre := engine.New(plan.Engine{ID: "P1", URL: "http://127.0.0.1:1", BootstrapPort: 8998})
	// TotalAlloc counts the whole process: goroutines left by earlier tests allocate
	// beside the call now and then, so the call's cost is the least of a few tries. A
	// copy of the body would show in every one of them.
	var pl payload
	boot := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		pl, _ = withBootstrap(body, pre, 42, 0)
		runtime.ReadMemStats(&after)
		boot = min(boot, after.TotalAlloc-before.TotalAlloc)
	}
	if boot > 4<<10 {
		t.Errorf("adding bootstrap fields to a %d-byte body allocated %d bytes", len(body), boot)
	}
	if pl.len() <= int64(len(body)) {
		t.Error("the bootstrap fields are missing")
	}
}

// BenchmarkPDBootstrap measures adding the bootstrap fields to a 30 MiB body.
func BenchmarkPDBootstrap(b *testing.B) {
	body := largeChat(30 << 20)
	pre := engine.New(plan.Engine{ID: "P1", URL: "http://127.0.0.1:1", BootstrapPort: 8998})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := withBootstrap(body, pre, 42, 0); err != nil {
			b.Fatal(err)
		}
	}
}
