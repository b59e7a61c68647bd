package kv

import (
	"encoding/binary"
	"testing"

	"github.com/routerkit/router/runtime/plan"
)

// FuzzDecodeMessage feeds arbitrary payloads, as a broken or hostile publisher could send,
// through the decoder and into a capped index: nothing may panic, and the rank never holds
// more blocks than its cap.
func FuzzDecodeMessage(f *testing.F) {
	for _, name := range []string{"sglang_batch.hex", "vllm_array_batch.hex", "vllm_map_batch.hex", "vllm_struct_batch.hex"} {
		f.Add(golden(f, name))
	}
	f.Add([]byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x00})
	p := &plan.Plan{Engines: []plan.Engine{{ID: "E", Model: "m", KVEvents: &plan.KVEvents{MaxBlocks: 8, BlockSize: 4}}}}
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := decodeMessage([][]byte{[]byte("kv"), binary.BigEndian.AppendUint64(nil, 1), payload})
		if err != nil {
			return
		}
		ix := NewIndex(p)
		ix.Apply("E", 0, m.events...)
		ix.Apply("E", 0, m.events...)
		if n := ix.Blocks("E"); n > 8 {
			t.Fatalf("rank holds %d blocks, cap 8", n)
		}
		ix.Lookup([]uint32{1, 2, 3, 4, 5, 6, 7, 8}, 4)
	})
}
