package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// vllmHasher names blocks as vLLM does with --prefix-caching-hash-algo sha256_cbor:
// a block's hash is SHA-256 over the canonical CBOR of (parent hash, token ids, extra
// keys), chained from NONE_HASH = SHA-256(CBOR(seed)) (vllm/v1/core/kv_cache_utils.py,
// hash_block_tokens and init_none_hash), and KV events carry its last 8 bytes as an
// unsigned integer (maybe_convert_block_hash). The simulator's cache names blocks by
// SGLang's hash; the hasher keeps each held block's vLLM digest so children chain from it,
// which makes the published hashes differ from SGLang's as a real vLLM's do, and from
// engine to engine with the seed.
type vllmHasher struct {
	none    [sha256.Size]byte
	digests map[int64][sha256.Size]byte // SGLang hash -> vLLM digest, of blocks held
}

func newVLLMHasher(seed string) *vllmHasher {
	var b []byte
	b = cborText(b, seed)
	return &vllmHasher{none: sha256.Sum256(b), digests: map[int64][sha256.Size]byte{}}
}

// store returns the vLLM digest of a block stored under parent and remembers it.
func (h *vllmHasher) store(e kvEvent) [sha256.Size]byte {
	parent := h.none
	if e.hasParent {
		if d, ok := h.digests[e.parent]; ok {
			parent = d
		}
	}
	var b []byte
	b = append(b, 0x83) // array(3)
	b = cborBytes(b, parent[:])
	b = cborHead(b, 4, uint64(len(e.tokens)))
	for _, t := range e.tokens {
		b = cborHead(b, 0, uint64(t))
	}
	b = append(b, 0xf6) // null: no extra keys
	d := sha256.Sum256(b)
	h.digests[e.hash] = d
	return d
}

// external returns the published hash of a held block.
func (h *vllmHasher) external(sglang int64) uint64 {
	d := h.digests[sglang]
	return binary.BigEndian.Uint64(d[sha256.Size-8:])
}

func (h *vllmHasher) forget(sglang int64) { delete(h.digests, sglang) }
func (h *vllmHasher) reset()              { clear(h.digests) }

// cborHead appends a CBOR head of major type major with argument n, shortest form.
func cborHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

func cborBytes(b, v []byte) []byte { return append(cborHead(b, 2, uint64(len(v))), v...) }
func cborText(b []byte, s string) []byte {
	return append(cborHead(b, 3, uint64(len(s))), s...)
}

// vllmStored is one BlockStored of vLLM: a run of chained blocks.
type vllmStored struct {
	hashes []uint64
	parent *uint64
	tokens []uint32
}

// encodeVLLMBatch writes a batch as vLLM's msgspec encoder does. asMap is the current
// encoding (vllm/distributed/kv_events.py: neither EventBatch nor the events are
// array_like, so both are maps, events tagged by "type", fields in declaration order,
// defaults omitted); otherwise vLLM's older positional arrays. Consecutive stores of a
// chain become one BlockStored with several blocks, as vLLM reports a request's new
// blocks together.
func (h *vllmHasher) encodeBatch(ts time.Time, events []kvEvent, dpRank, blockSize int, asMap bool) ([]byte, error) {
	var out []any
	var run *vllmStored
	for _, e := range events {
		switch e.kind {
		case blockStored:
			d := h.store(e)
			ext := binary.BigEndian.Uint64(d[sha256.Size-8:])
			if run != nil && e.hasParent && len(run.hashes) > 0 && h.external(e.parent) == run.hashes[len(run.hashes)-1] {
				run.hashes = append(run.hashes, ext)
				run.tokens = append(run.tokens, e.tokens...)
				continue
			}
			run = &vllmStored{hashes: []uint64{ext}, tokens: append([]uint32(nil), e.tokens...)}
			if e.hasParent {
				p := h.external(e.parent)
				run.parent = &p
			}
			out = append(out, run)
		case blockRemoved:
			ext := h.external(e.hash)
			h.forget(e.hash)
			out = append(out, vllmEvent(asMap, "BlockRemoved", []any{"block_hashes", []uint64{ext}}, []any{"medium", mediumGPU}, []any{"group_idx", 0}))
			run = nil
		case allBlocksCleared:
			h.reset()
			out = append(out, vllmEvent(asMap, "AllBlocksCleared"))
			run = nil
		}
	}
	for i, o := range out {
		if s, ok := o.(*vllmStored); ok {
			var parent any
			if s.parent != nil {
				parent = *s.parent
			}
			extra := make([]any, len(s.hashes))
			out[i] = vllmEvent(asMap, "BlockStored",
				[]any{"block_hashes", s.hashes}, []any{"parent_block_hash", parent}, []any{"token_ids", s.tokens},
				[]any{"block_size", blockSize}, []any{"lora_id", nil}, []any{"medium", mediumGPU}, []any{"lora_name", nil},
				[]any{"extra_keys", extra}, []any{"group_idx", 0}, []any{"kv_cache_spec_kind", "full_attention"})
		}
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true) // msgspec writes every integer in its shortest form
	var err error
	if asMap {
		err = encodeOrdered(enc, []any{"ts", unixSeconds(ts)}, []any{"events", out}, []any{"data_parallel_rank", dpRank})
	} else {
		err = enc.Encode([]any{unixSeconds(ts), out, dpRank})
	}
	if err != nil {
		return nil, fmt.Errorf("encode vllm kv event batch: %w", err)
	}
	return buf.Bytes(), nil
}

// orderedMap is a msgpack map written in its given key order, as msgspec writes struct
// fields in declaration order.
type orderedMap [][]any

func (m orderedMap) EncodeMsgpack(enc *msgpack.Encoder) error { return encodeOrdered(enc, m...) }

func encodeOrdered(enc *msgpack.Encoder, kvs ...[]any) error {
	if err := enc.EncodeMapLen(len(kvs)); err != nil {
		return err
	}
	for _, kv := range kvs {
		if err := enc.EncodeString(kv[0].(string)); err != nil {
			return err
		}
		if err := enc.Encode(kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// vllmEvent is one tagged event: a map with "type" first, or a positional array.
func vllmEvent(asMap bool, tag string, fields ...[]any) any {
	if asMap {
		return append(orderedMap{{"type", tag}}, fields...)
	}
	arr := []any{tag}
	for _, f := range fields {
		arr = append(arr, f[1])
	}
	return arr
}
