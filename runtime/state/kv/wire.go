package kv

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Bounds of one event, so a corrupt or hostile message cannot make the index allocate
// without limit. The hash bound is the reference router's.
const (
	maxHashesPerEvent = 65536
	maxTokensPerEvent = 1 << 22
)

// message is one decoded KV event message of a publisher.
type message struct {
	topic  string
	seq    uint64
	events []Event
	// skipped counts events of kinds this router does not know.
	skipped int
}

// decodeMessage decodes a KV event message of SGLang, vLLM or llm-d's simulator: three
// frames, topic, the batch sequence number as 8 big-endian bytes, and a msgpack batch.
// The batch is positional (SGLang, vLLM before it dropped array_like)
//
//	[ts, [event...], dp_rank]    (dp_rank may be nil or omitted)
//
// or a map {"ts", "events", "data_parallel_rank"} (vLLM's EventBatch without
// array_like). Events are tagged positional arrays (SGLang, older vLLM)
//
//	["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name, extra_keys,
//	 group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window, ...]
//	["BlockRemoved", block_hashes, medium, group_idx, ...]
//	["AllBlocksCleared"]
//
// or maps tagged by "type" with those field names (vLLM since PR #42892). Trailing fields
// may be omitted and unknown fields are ignored; events of unknown types are skipped and
// counted. The payload is decoded into generic values and read with guards rather than
// into fixed structs, because msgpack's array-encoded structs fail on any change in field
// count, and both engines add fields. sc, when not nil, is the subscription's scratch
// (scanBatch): the events are then valid until its next message.
func decodeMessage(frames [][]byte, sc *scratch) (message, error) {
	if len(frames) != 3 {
		return message{}, fmt.Errorf("want 3 frames (topic, sequence, payload), got %d", len(frames))
	}
	if len(frames[1]) != 8 {
		return message{}, fmt.Errorf("sequence frame has %d bytes, want 8", len(frames[1]))
	}
	m := message{topic: string(frames[0]), seq: binary.BigEndian.Uint64(frames[1])}
	if events, skipped, ok := scanBatch(frames[2], sc); ok {
		m.events, m.skipped = events, skipped
		return m, nil
	}
	if err := checkPayload(frames[2]); err != nil {
		return message{}, fmt.Errorf("decoding payload: %w", err)
	}
	return decodeGeneric(m, frames[2])
}

// decodeGeneric decodes a payload through msgpack's generic values, for what scanBatch
// does not read.
func decodeGeneric(m message, payload []byte) (message, error) {
	var batch any
	if err := msgpack.Unmarshal(payload, &batch); err != nil {
		return message{}, fmt.Errorf("decoding payload: %w", err)
	}
	var events any
	switch b := batch.(type) {
	case []any:
		if len(b) < 2 {
			return message{}, fmt.Errorf("payload has %d fields, want [ts, events, dp_rank]", len(b))
		}
		events = b[1]
	case map[string]any:
		var ok bool
		if events, ok = b["events"]; !ok {
			return message{}, errors.New("payload map has no events field")
		}
	default:
		return message{}, fmt.Errorf("decoding payload: batch is %T, want an array or a map", batch)
	}
	raw, ok := events.([]any)
	if !ok && events != nil {
		return message{}, fmt.Errorf("payload events are %T, want an array", events)
	}
	for i, r := range raw {
		e, err := decodeEvent(r)
		if err != nil {
			return message{}, fmt.Errorf("event %d: %w", i, err)
		}
		if e.Kind == 0 {
			m.skipped++
			continue
		}
		m.events = append(m.events, e)
	}
	return m, nil
}

// Positions of the fields of positional events, counting the tag as 0, and their names in
// map events.
const (
	posHashes        = 1
	posParent        = 2
	posTokens        = 3
	posStoredSize    = 4
	posLoraID        = 5
	posStoredMedium  = 6
	posLoraName      = 7
	posExtraKeys     = 8
	posStoredGroup   = 9
	posRemovedMedium = 2
	posRemovedGroup  = 3

	fieldType      = "type"
	fieldHashes    = "block_hashes"
	fieldParent    = "parent_block_hash"
	fieldTokens    = "token_ids"
	fieldBlockSize = "block_size"
	fieldLoraID    = "lora_id"
	fieldMedium    = "medium"
	fieldLoraName  = "lora_name"
	fieldExtraKeys = "extra_keys"
	fieldGroup     = "group_idx"
)

// decodeEvent normalises one event. An unknown type yields a zero Event and no error.
func decodeEvent(v any) (Event, error) {
	var tag string
	var field func(pos int, name string) any
	positional := false
	switch ev := v.(type) {
	case []any:
		positional = true
		if len(ev) == 0 {
			return Event{}, errors.New("empty event array")
		}
		tag, _ = ev[0].(string)
		field = func(pos int, _ string) any {
			if pos < len(ev) {
				return ev[pos]
			}
			return nil
		}
	case map[string]any:
		tag, _ = ev[fieldType].(string)
		field = func(_ int, name string) any { return ev[name] }
	default:
		return Event{}, fmt.Errorf("event is %T, want an array or a map", v)
	}
	if tag == "" {
		return Event{}, errors.New("event has no type tag")
	}
	switch tag {
	case "BlockStored":
		return decodeStored(field, positional)
	case "BlockRemoved":
		hashes, err := decodeHashes(field(posHashes, fieldHashes))
		if err != nil {
			return Event{}, err
		}
		medium, err := decodeMedium(field(posRemovedMedium, fieldMedium), allMedia)
		if err != nil {
			return Event{}, err
		}
		groups, err := decodeGroup(field(posRemovedGroup, fieldGroup))
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: BlockRemoved, Hashes: hashes, Medium: medium, Groups: groups}, nil
	case "AllBlocksCleared":
		return Event{Kind: AllBlocksCleared}, nil
	default:
		return Event{}, nil
	}
}

// decodeStored reads a BlockStored event; positional tells the array encoding, in which
// llm-d's simulator writes parent hash 0 for "no parent".
func decodeStored(field func(pos int, name string) any, positional bool) (Event, error) {
	hashes, err := decodeHashes(field(posHashes, fieldHashes))
	if err != nil {
		return Event{}, err
	}
	medium, err := decodeMedium(field(posStoredMedium, fieldMedium), MediumGPU)
	if err != nil {
		return Event{}, err
	}
	groups, err := decodeGroup(field(posStoredGroup, fieldGroup))
	if err != nil {
		return Event{}, err
	}
	e := Event{Kind: BlockStored, Hashes: hashes, Medium: medium, Groups: groups}
	size, _ := asInt(field(posStoredSize, fieldBlockSize))
	e.BlockSize = int(size)
	if p := field(posParent, fieldParent); p != nil {
		if e.Parent, err = decodeHash(p); err != nil {
			return Event{}, fmt.Errorf("parent_block_hash: %w", err)
		}
		e.HasParent = true
		// llm-d-inference-sim's array format writes its "no parent" (llm-d-kv-cache's
		// EmptyBlockHash, 0) where SGLang and vLLM write nil, and llm-d's own indexer reads
		// 0 as none. A 0 there is taken as the start of a sequence unless the rank holds a
		// block the engine calls 0 (see Index.store).
		e.ParentMayBeRoot = positional && e.Parent == 0
	}
	if e.Tokens, err = decodeTokens(field(posTokens, fieldTokens)); err != nil {
		return Event{}, err
	}
	e.Foreign = field(posLoraID, fieldLoraID) != nil || field(posLoraName, fieldLoraName) != nil ||
		anyExtraKey(field(posExtraKeys, fieldExtraKeys))
	return e, nil
}

// anyExtraKey reports whether vLLM's extra_keys (one entry per block, or nil) name
// anything beyond the tokens for some block: multimodal inputs, a LoRA adapter, a cache
// salt. Those blocks' contents depend on more than the token ids.
func anyExtraKey(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return v != nil
	}
	for _, k := range list {
		if k != nil {
			return true
		}
	}
	return false
}

func decodeHashes(v any) ([]int64, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("block_hashes is %T, want an array", v)
	}
	if len(list) > maxHashesPerEvent {
		return nil, fmt.Errorf("%d block hashes in one event, more than %d", len(list), maxHashesPerEvent)
	}
	hashes := make([]int64, len(list))
	for i, h := range list {
		n, err := decodeHash(h)
		if err != nil {
			return nil, fmt.Errorf("block hash %d: %w", i, err)
		}
		hashes[i] = n
	}
	return hashes, nil
}

// decodeHash reads an engine's block hash. The router uses it only as a name for the
// block within the engine, so any width maps to 64 bits: SGLang sends a signed 64-bit
// integer, vLLM an unsigned one (values of 2^63 and above keep their bits), and vLLM with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 the raw digest, read from its first 8 bytes.
func decodeHash(v any) (int64, error) {
	if b, ok := v.([]byte); ok {
		if len(b) < 8 {
			return 0, fmt.Errorf("is %d bytes, want at least 8", len(b))
		}
		return int64(binary.BigEndian.Uint64(b[:8])), nil
	}
	if n, ok := asInt(v); ok {
		return n, nil
	}
	return 0, fmt.Errorf("is %T, want an integer or bytes", v)
}

// decodeTokens reads a store's token ids: integers, or, from SGLang with EAGLE
// speculative decoding, the bigram keys of its radix tree, pairs (t[i], t[i+1]) of
// consecutive tokens, one per token, whose first elements are the block's tokens.
func decodeTokens(v any) ([]uint32, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("token_ids is %T, want an array", v)
	}
	if len(list) > maxTokensPerEvent {
		return nil, fmt.Errorf("%d token ids in one event, more than %d", len(list), maxTokensPerEvent)
	}
	ids := make([]uint32, len(list))
	bigrams := len(list) > 0 && isList(list[0])
	next := int64(-1) // the second token of the previous bigram
	for i, t := range list {
		if bigrams {
			pair, ok := t.([]any)
			if !ok || len(pair) != 2 {
				return nil, fmt.Errorf("token id %d is %v, want an EAGLE bigram [token, next token] like the ones before it", i, t)
			}
			first, err := tokenID(pair[0])
			if err != nil {
				return nil, fmt.Errorf("bigram %d: %w", i, err)
			}
			if next >= 0 && int64(first) != next {
				return nil, fmt.Errorf("bigram %d starts with %d, not the %d that ended bigram %d", i, first, next, i-1)
			}
			second, err := tokenID(pair[1])
			if err != nil {
				return nil, fmt.Errorf("bigram %d: %w", i, err)
			}
			ids[i], next = first, int64(second)
			continue
		}
		n, err := tokenID(t)
		if err != nil {
			return nil, fmt.Errorf("token id %d: %w", i, err)
		}
		ids[i] = n
	}
	return ids, nil
}

func isList(v any) bool {
	_, ok := v.([]any)
	return ok
}

func tokenID(v any) (uint32, error) {
	n, ok := asInt(v)
	if !ok || n < 0 || n > 1<<32-1 {
		return 0, fmt.Errorf("%v is not an unsigned 32-bit integer", v)
	}
	return uint32(n), nil
}

// decodeGroup reads vLLM's group_idx, the KV-cache group of a hybrid-attention model
// (full attention, sliding window, ...) an event is about, as a set of group slots,
// empty when the field is nil or missing.
func decodeGroup(v any) (groupSet, error) {
	if v == nil {
		return 0, nil
	}
	n, ok := asInt(v)
	if !ok || n < 0 {
		return 0, fmt.Errorf("group_idx is %v, want a non-negative integer", v)
	}
	return 1 << min(n, groupSlots-1), nil
}

// asInt reads a decoded msgpack integer, whose Go type follows its encoding's width. A
// uint64 above the int64 range keeps its bits, which is how publishers send hashes whose
// top bit is set.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), true
	}
	return 0, false
}

func decodeMedium(v any, absent Medium) (Medium, error) {
	switch m := v.(type) {
	case nil:
		return absent, nil
	case string:
		return parseMedium(m, absent), nil
	}
	return 0, fmt.Errorf("medium is %T, want a string", v)
}
