package kv

import (
	"encoding/binary"
	"fmt"
	"reflect"
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
		m, err := decodeMessage([][]byte{[]byte("kv"), binary.BigEndian.AppendUint64(nil, 1), payload}, nil)
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

// FuzzScanMatchesGeneric holds scanBatch to the generic decoder it stands in front of:
// on every payload it reads, checkPayload finds nothing to refuse (it runs only before
// the generic path) and msgpack's generic values give no error and the same events, read
// into a scratch or not.
func FuzzScanMatchesGeneric(f *testing.F) {
	for _, name := range []string{"sglang_batch.hex", "vllm_array_batch.hex", "vllm_map_batch.hex", "vllm_struct_batch.hex"} {
		f.Add(golden(f, name))
	}
	for _, vllm := range []bool{false, true} {
		batches := newEventBatches(f, vllm)
		f.Add(batches.stored[0][2])
		f.Add(batches.evicted[0][2])
	}
	f.Add(encode(f, []any{1.5, []any{[]any{"BlockStored", []any{[]byte("12345678")}, int64(0), []any{1, 2}, "x", 7, "CPU", nil, []any{nil, "salt"}, 3, "extra"}}, nil}))
	f.Add(encode(f, map[string]any{"events": []any{map[string]any{"type": "BlockRemoved", "block_hashes": []any{1}, "token_ids": "ignored", "group_idx": -1}}}))
	f.Add(encode(f, []any{1.5, []any{[]any{"Unknown", 1}, []any{"AllBlocksCleared", 2}, []any{"BlockStored", []any{1}, nil, []any{[]any{1, 2}, []any{2, 3}}}}}))
	var sc scratch
	f.Fuzz(func(t *testing.T, payload []byte) {
		events, skipped, ok := scanBatch(payload, nil)
		if !ok {
			return
		}
		if err := checkPayload(payload); err != nil {
			t.Fatalf("scanBatch read %+v where checkPayload refuses: %v", events, err)
		}
		again, skippedAgain, ok := scanBatch(payload, &sc)
		if !ok || !reflect.DeepEqual(events, again) || skipped != skippedAgain {
			t.Fatalf("scanBatch into a scratch %+v (%d skipped, %v), without %+v (%d skipped)", again, skippedAgain, ok, events, skipped)
		}
		want, err := decodeGeneric(message{}, payload)
		if err != nil {
			t.Fatalf("scanBatch read %+v where the generic decoder refuses: %v", events, err)
		}
		if !reflect.DeepEqual(events, want.events) || skipped != want.skipped {
			t.Fatalf("scanBatch %+v (%d skipped), generic %+v (%d skipped)", events, skipped, want.events, want.skipped)
		}
	})
}

// TestScanReadsThePublishersBatches: the batches SGLang and vLLM publish (the goldens and
// the benchmark's) take the scanner's path, not the generic fallback, and read the same.
func TestScanReadsThePublishersBatches(t *testing.T) {
	payloads := map[string][]byte{}
	for _, name := range []string{"sglang_batch.hex", "vllm_array_batch.hex", "vllm_map_batch.hex", "vllm_struct_batch.hex"} {
		payloads[name] = golden(t, name)
	}
	for _, vllm := range []bool{false, true} {
		batches := newEventBatches(t, vllm)
		payloads[fmt.Sprintf("stored, vllm %v", vllm)] = batches.stored[0][2]
		payloads[fmt.Sprintf("evicted, vllm %v", vllm)] = batches.evicted[0][2]
	}
	for name, p := range payloads {
		events, skipped, ok := scanBatch(p, nil)
		if !ok {
			t.Errorf("%s: the scanner gave up", name)
			continue
		}
		want, err := decodeGeneric(message{}, p)
		if err != nil || !reflect.DeepEqual(events, want.events) || skipped != want.skipped {
			t.Errorf("%s: scanner %+v (%d skipped), generic %+v (%d skipped), %v", name, events, skipped, want.events, want.skipped, err)
		}
	}
}

// TestScanRefusesWhatCheckPayloadRefuses: decodeMessage runs checkPayload only when the
// scanner gives up, so the scanner must give up on every payload the check refuses. An
// unknown field of a positional BlockStored and an element of vLLM's extra_keys nest a
// skipped value 1 to 20 levels deep; the scanner reads the shallow ones.
func TestScanRefusesWhatCheckPayloadRefuses(t *testing.T) {
	read := 0
	for depth := 1; depth <= 20; depth++ {
		var nested any = 1
		for range depth {
			nested = []any{nested}
		}
		for _, p := range [][]byte{
			encode(t, []any{1.5, []any{[]any{"BlockStored", []any{1}, nil, nil, 16, nil, "GPU", nil, nil, nil, nested}}}),
			encode(t, []any{1.5, []any{[]any{"BlockStored", []any{1}, nil, nil, 16, nil, "GPU", nil, []any{nested}}}}),
		} {
			_, _, ok := scanBatch(p, nil)
			err := checkPayload(p)
			if ok && err != nil {
				t.Fatalf("nested %d deep: the scanner read a payload checkPayload refuses: %v", depth, err)
			}
			if ok {
				read++
			}
		}
	}
	if read == 0 {
		t.Fatal("the scanner read none of the payloads")
	}
}

// TestScratchKeepsNoLargeBatch: a subscription's scratch keeps the arrays of the
// publishers' usual batches for the next, and lets go of those a peer's large batch grew
// past maxScratch elements.
func TestScratchKeepsNoLargeBatch(t *testing.T) {
	batch := func(blocks int) []byte {
		hashes, toks := make([]any, blocks), make([]any, blocks*4)
		for i := range hashes {
			hashes[i] = i + 1
		}
		for i := range toks {
			toks[i] = i % 100
		}
		return encode(t, []any{1.5, []any{[]any{"BlockStored", hashes, nil, toks, 4, nil, "GPU"}}})
	}
	var sc scratch
	if events, _, ok := scanBatch(batch(32), &sc); !ok || len(events) != 1 || len(events[0].Tokens) != 128 {
		t.Fatalf("a 32-block batch: ok %v, events %d", ok, len(events))
	}
	if cap(sc.tokens) < 128 || cap(sc.hashes) < 32 || cap(sc.events) < 1 {
		t.Fatalf("the scratch kept %d tokens, %d hashes, %d events of a small batch", cap(sc.tokens), cap(sc.hashes), cap(sc.events))
	}
	if events, _, ok := scanBatch(batch(maxScratch), &sc); !ok || len(events[0].Tokens) != 4*maxScratch {
		t.Fatalf("a large batch: ok %v", ok)
	}
	if cap(sc.tokens) > maxScratch || cap(sc.hashes) > maxScratch || cap(sc.events) > maxScratch {
		t.Fatalf("the scratch kept %d tokens, %d hashes, %d events after a large batch", cap(sc.tokens), cap(sc.hashes), cap(sc.events))
	}
}
