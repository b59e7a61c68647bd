package kv

import (
	"testing"

	"github.com/routerkit/router/runtime/token"
)

// applyMessage decodes one publisher message and applies it to engine B's rank 0 (16-token
// pages in testPlan), failing the test on a decoding error.
func applyMessage(t *testing.T, ix *Index, seq uint64, batch any) {
	t.Helper()
	m, err := decodeMessage(frames(seq, encode(t, batch)), nil)
	if err != nil {
		t.Fatalf("decoding: %v", err)
	}
	ix.Apply("B", 0, m.events...)
}

// simStored is BlockStored in llm-d-inference-sim's default array format, the fields of
// msgpackBlockStoredEvent in pkg/kv-cache/kv_cache_sender.go (module v0.10.2, commit
// f36f65268ed81dd1e2636bb2e0fa0a0e22c10688), written with the same msgpack library and
// struct options: its "no parent" is ParentHash 0 (kvblock.EmptyBlockHash), not nil.
type simStored struct {
	//lint:ignore U1000 msgpack reads the field's tag
	_msgpack        struct{} `msgpack:",as_array"`
	Tag             string
	BlockHashes     []any
	ParentBlockHash any
	TokenIds        []uint32
	BlockSize       int
	LoraID          *int    `msgpack:",omitempty"`
	Medium          *string `msgpack:",omitempty"`
	LoraName        *string `msgpack:",omitempty"`
	ExtraKeys       []any   `msgpack:",omitempty"`
}

// TestSimArrayFormatParentZeroStartsASequence: llm-d-inference-sim's array format writes
// parent 0 for a sequence's first block (llm-d-kv-cache v0.9.0, commit
// 7bfda47558fe457e644c0dbc69b378321ba69ada, pkg/kvevents/pool.go, reads ParentHash 0 as
// none). Before, every such block was an orphan and the rank indexed nothing.
func TestSimArrayFormatParentZeroStartsASequence(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(16 * 3)
	gpu := "GPU"
	first := &simStored{Tag: "BlockStored", BlockHashes: []any{uint64(11), uint64(12)}, ParentBlockHash: uint64(0),
		TokenIds: prompt[:32], BlockSize: 16, Medium: &gpu}
	applyMessage(t, ix, 1, []any{1.0, []any{first}, 0})
	if got, want := matches(ix.Lookup(prompt, 16)), "B=2"; got != want {
		t.Fatalf("after the sim's first store: %q, want %q", got, want)
	}
	// The continuation names its parent by the sim's hash, as before.
	next := &simStored{Tag: "BlockStored", BlockHashes: []any{uint64(13)}, ParentBlockHash: uint64(12),
		TokenIds: prompt[32:], BlockSize: 16, Medium: &gpu}
	applyMessage(t, ix, 2, []any{1.0, []any{next}, 0})
	if got, want := matches(ix.Lookup(prompt, 16)), "B=3"; got != want {
		t.Fatalf("after the continuation: %q, want %q", got, want)
	}
	if s := ix.Stats("B"); s.Orphans != 0 {
		t.Fatalf("%d orphans, want 0", s.Orphans)
	}
}

// TestParentZeroIsARealHashWhereHeldOrMapped: the choice is conservative. A rank that holds
// a block the engine calls 0 chains to it, and the map format, whose "no parent" is nil
// (vLLM's ExternalBlockHash | None; the sim's map encoder writes nil too), keeps 0 as a
// hash, so an unknown parent 0 there is still an orphan.
func TestParentZeroIsARealHashWhereHeldOrMapped(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(16 * 2)
	h := token.BlockHashes(prompt, 16)
	applyMessage(t, ix, 0, []any{1.0, []any{[]any{"BlockStored", []any{0}, nil, prompt[:16], 16}}, 0})
	applyMessage(t, ix, 1, []any{1.0, []any{[]any{"BlockStored", []any{7}, 0, prompt[16:], 16}}, 0})
	if got, want := matches(ix.LookupHashes(h, 16)), "B=2"; got != want {
		t.Fatalf("a held block 0 as parent: %q, want %q", got, want)
	}

	ix = NewIndex(testPlan())
	mapped := map[string]any{"type": "BlockStored", "block_hashes": []any{5}, "parent_block_hash": 0,
		"token_ids": prompt[16:], "block_size": 16}
	applyMessage(t, ix, 0, map[string]any{"ts": 1.0, "events": []any{mapped}})
	if s := ix.Stats("B"); s.Orphans != 1 || len(ix.LookupHashes(h[1:], 16)) > 0 {
		t.Fatalf("map-format parent 0 unknown to the rank: orphans %d, want 1, and nothing indexed", s.Orphans)
	}
}

// TestSGLangEagleBigramKeys: with EAGLE speculative decoding SGLang keys its radix tree by
// bigrams of consecutive tokens (python/sglang/srt/mem_cache/utils.py
// convert_to_bigram_key, [1,2,3] -> [(1,2),(2,3)]) and publishes a page's keys as its
// token_ids (radix_cache.py _record_store_event), at sgl-project/sglang commit
// 006b0e3d317f1cd4a7300e919a4eaa878b1947e7. msgpack writes each tuple as a 2-array. A page
// of bigrams holds the KV of their first tokens, so it is the router's block of those.
// Before, the pair list failed the whole message and cleared the rank.
func TestSGLangEagleBigramKeys(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(16*2 + 1)
	bigrams := func(from, to int) []any {
		var out []any
		for i := from; i < to; i++ {
			out = append(out, []any{prompt[i], prompt[i+1]})
		}
		return out
	}
	applyMessage(t, ix, 0, []any{1.0, []any{
		[]any{"BlockStored", []any{-5}, nil, bigrams(0, 16), 16, nil, "GPU"},
		[]any{"BlockStored", []any{-6}, -5, bigrams(16, 32), 16, nil, "GPU"},
	}, 0})
	if got, want := matches(ix.Lookup(prompt[:32], 16)), "B=2"; got != want {
		t.Fatalf("EAGLE pages: %q, want %q", got, want)
	}

	// Pairs that do not chain are not bigram keys: the message is refused, not guessed.
	broken := bigrams(0, 16)
	broken[3] = []any{uint32(1), uint32(2)}
	if _, err := decodeMessage(frames(1, encode(t, []any{1.0, []any{[]any{"BlockStored", []any{-5}, nil, broken, 16}}})), nil); err == nil {
		t.Fatal("bigrams that do not chain were accepted")
	}
}

// TestVLLMHybridGroups: vLLM's hybrid-attention models keep a KV-cache group per
// attention kind and publish each group's stores and removals with its group_idx
// (vllm/distributed/kv_events.py BlockStored.group_idx, kv_cache_spec_kind,
// kv_cache_spec_sliding_window and BlockRemoved.group_idx, vllm-project/vllm commit
// 0181ea3173e53eea8cf04a86891488e3dc89bb34). The sliding-window group drops blocks that
// slid out of its window while the full-attention group still holds them: the engine
// still has the prefix. Before, that removal dropped the block from the index.
func TestVLLMHybridGroups(t *testing.T) {
	ix := NewIndex(testPlan())
	prompt := ids(16 * 2)
	store := func(group int, kind string, window any) map[string]any {
		return map[string]any{"type": "BlockStored", "block_hashes": []any{uint64(1) << 63, 9}, "parent_block_hash": nil,
			"token_ids": prompt, "block_size": 16, "lora_id": nil, "medium": "GPU", "lora_name": nil,
			"group_idx": group, "kv_cache_spec_kind": kind, "kv_cache_spec_sliding_window": window}
	}
	remove := func(group any) map[string]any {
		return map[string]any{"type": "BlockRemoved", "block_hashes": []any{uint64(1) << 63}, "medium": "GPU", "group_idx": group}
	}
	applyMessage(t, ix, 0, map[string]any{"ts": 1.0, "events": []any{store(0, "full_attention", nil), store(1, "sliding_window", 128)}})
	applyMessage(t, ix, 1, map[string]any{"ts": 2.0, "events": []any{remove(1)}})
	if got, want := matches(ix.Lookup(prompt, 16)), "B=2"; got != want {
		t.Fatalf("after the sliding-window group's removal: %q, want %q", got, want)
	}
	applyMessage(t, ix, 2, map[string]any{"ts": 3.0, "events": []any{remove(0)}})
	if got := matches(ix.Lookup(prompt, 16)); got != "" {
		t.Fatalf("after the full-attention group's removal too: %q, want no match", got)
	}

	// A removal that names no group removes the block from every group.
	applyMessage(t, ix, 3, map[string]any{"ts": 4.0, "events": []any{store(0, "full_attention", nil), store(1, "sliding_window", 128)}})
	applyMessage(t, ix, 4, map[string]any{"ts": 5.0, "events": []any{remove(nil)}})
	if got := matches(ix.Lookup(prompt, 16)); got != "" {
		t.Fatalf("after a removal without group_idx: %q, want no match", got)
	}
}
