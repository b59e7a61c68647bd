package kv

import (
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// FuzzDecodeMessage feeds the KV event decoder arbitrary payloads (with a valid topic and
// sequence): it never panics, and what it accepts applies to an index without panicking.
func FuzzDecodeMessage(f *testing.F) {
	for _, name := range []string{"sglang_batch.hex", "vllm_map_batch.hex"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		b, err := hex.DecodeString(strings.TrimSpace(string(data)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x93, 0x01, 0x90, 0xc0})
	f.Add([]byte{0x92, 0x01, 0x91, 0x91, 0xb0, 'A', 'l', 'l', 'B', 'l', 'o', 'c', 'k', 's', 'C', 'l', 'e', 'a', 'r', 'e', 'd'})
	ix := NewIndex(&plan.Plan{Engines: []plan.Engine{{ID: "A", Model: "m", DPSize: 1, KVEvents: &plan.KVEvents{Endpoint: "tcp://x"}}},
		State: plan.StateLimits{KVMaxBlocksPerEngine: 1000}})
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := decodeMessage([][]byte{[]byte("kv"), make([]byte, 8), payload})
		if err != nil {
			return
		}
		for _, e := range m.events {
			if e.Kind == 0 {
				t.Fatalf("decoded an event without a kind: %+v", e)
			}
		}
		ix.Apply("A", 0, m.events...)
		if ix.Blocks("A") > 1000 {
			t.Fatalf("index over its cap: %d", ix.Blocks("A"))
		}
	})
}
