package kv

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// maxHashesPerEvent bounds one event's block hashes, as the reference router does, so a
// corrupt or hostile message cannot make the index allocate without limit.
const maxHashesPerEvent = 65536

// message is one decoded KV event message of a publisher.
type message struct {
	seq    uint64
	events []Event
}

// decodeMessage decodes SGLang's (and vLLM's) KV event message: three frames, topic,
// the batch sequence number as 8 big-endian bytes, and a msgpack payload
//
//	[ts, [event...], dp_rank]    (dp_rank may be nil or omitted)
//
// whose events are either tagged positional arrays (SGLang, older vLLM)
//
//	["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, ...]
//	["BlockRemoved", block_hashes, medium]
//	["AllBlocksCleared"]
//
// or maps tagged by "type" with the same field names (newer vLLM). Trailing fields may be
// omitted and unknown fields are ignored; unknown event types are skipped. The payload
// is decoded into generic values and read with guards rather than into fixed structs,
// because msgpack's array-encoded structs fail on any change in field count.
func decodeMessage(frames [][]byte) (message, error) {
	if len(frames) != 3 {
		return message{}, fmt.Errorf("want 3 frames (topic, sequence, payload), got %d", len(frames))
	}
	if len(frames[1]) != 8 {
		return message{}, fmt.Errorf("sequence frame has %d bytes, want 8", len(frames[1]))
	}
	m := message{seq: binary.BigEndian.Uint64(frames[1])}
	var batch []any
	if err := msgpack.Unmarshal(frames[2], &batch); err != nil {
		return message{}, fmt.Errorf("decoding payload: %w", err)
	}
	if len(batch) < 2 {
		return message{}, fmt.Errorf("payload has %d fields, want [ts, events, dp_rank]", len(batch))
	}
	raw, ok := batch[1].([]any)
	if !ok && batch[1] != nil {
		return message{}, fmt.Errorf("payload events are %T, want an array", batch[1])
	}
	for i, r := range raw {
		e, err := decodeEvent(r)
		if err != nil {
			return message{}, fmt.Errorf("event %d: %w", i, err)
		}
		if e.Kind != 0 {
			m.events = append(m.events, e)
		}
	}
	return m, nil
}

// Positions of the fields read from positional events, counting the tag as 0, and their
// names in map events.
const (
	posHashes        = 1
	posStoredSize    = 4
	posStoredMedium  = 6
	posRemovedMedium = 2

	fieldType      = "type"
	fieldHashes    = "block_hashes"
	fieldBlockSize = "block_size"
	fieldMedium    = "medium"
)

// decodeEvent normalises one event. An unknown type yields a zero Event and no error.
func decodeEvent(v any) (Event, error) {
	var tag string
	var field func(pos int, name string) any
	switch ev := v.(type) {
	case []any:
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
		hashes, err := decodeHashes(field(posHashes, fieldHashes))
		if err != nil {
			return Event{}, err
		}
		medium, err := decodeMedium(field(posStoredMedium, fieldMedium), MediumGPU)
		if err != nil {
			return Event{}, err
		}
		size, _ := asInt(field(posStoredSize, fieldBlockSize))
		return Event{Kind: BlockStored, Hashes: hashes, Medium: medium, BlockSize: int(size)}, nil
	case "BlockRemoved":
		hashes, err := decodeHashes(field(posHashes, fieldHashes))
		if err != nil {
			return Event{}, err
		}
		medium, err := decodeMedium(field(posRemovedMedium, fieldMedium), allMedia)
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: BlockRemoved, Hashes: hashes, Medium: medium}, nil
	case "AllBlocksCleared":
		return Event{Kind: AllBlocksCleared}, nil
	default:
		return Event{}, nil
	}
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
		n, ok := asHash(h)
		if !ok {
			return nil, fmt.Errorf("block hash %d is %T, want an integer or bytes", i, h)
		}
		hashes[i] = n
	}
	return hashes, nil
}

// asHash reads a block hash. SGLang sends a signed 64-bit integer (the first 8 bytes of
// the page's SHA-256 digest, big-endian); an unsigned one is the same bits. A publisher
// sending the raw digest as bytes is read the same way, from its first 8 bytes.
func asHash(v any) (int64, bool) {
	if b, ok := v.([]byte); ok {
		if len(b) < 8 {
			return 0, false
		}
		return int64(binary.BigEndian.Uint64(b[:8])), true
	}
	return asInt(v)
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
