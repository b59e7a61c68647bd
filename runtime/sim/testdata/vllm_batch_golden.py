#!/usr/bin/env python3
"""Writes vllm_map_batch.golden.hex and vllm_array_batch.golden.hex: one KV event batch
as the simulator's vLLM kind publishes it, in vLLM's current map encoding and its older
positional one.

vLLM names blocks with hash_block_tokens(sha256_cbor, parent or NONE_HASH, tokens, None)
(vllm/v1/core/kv_cache_utils.py), NONE_HASH = sha256_cbor(PYTHONHASHSEED), and publishes
the digest's low 64 bits as an unsigned integer (maybe_convert_block_hash). Its msgspec
structs (vllm/distributed/kv_events.py) are maps tagged "type", fields in declaration
order, defaults omitted; before PR #42892 they were positional arrays. This script uses
cbor2 and msgpack (Debian: python3-cbor2, python3-msgpack), independently of the Go
encoder under test. The simulator seeds each engine with its id, here "V1".

    /usr/bin/python3 vllm_batch_golden.py
"""
import hashlib

import cbor2
import msgpack


def sha256_cbor(obj):
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def external(digest):
    return int.from_bytes(digest, "big") & ((1 << 64) - 1)


NONE_HASH = sha256_cbor("V1")
d1 = sha256_cbor((NONE_HASH, (1, 2, 3, 4), None))
d2 = sha256_cbor((d1, (5, 6, 7, 8), None))
h1, h2 = external(d1), external(d2)

stored = {"type": "BlockStored", "block_hashes": [h1, h2], "parent_block_hash": None,
          "token_ids": [1, 2, 3, 4, 5, 6, 7, 8], "block_size": 4, "lora_id": None, "medium": "GPU",
          "lora_name": None, "extra_keys": [None, None], "group_idx": 0, "kv_cache_spec_kind": "full_attention"}
removed = {"type": "BlockRemoved", "block_hashes": [h2], "medium": "GPU", "group_idx": 0}
cleared = {"type": "AllBlocksCleared"}
events = [stored, removed, cleared]

with open("vllm_map_batch.golden.hex", "w") as f:
    batch = {"ts": 1700000000.25, "events": events, "data_parallel_rank": 1}
    f.write(msgpack.packb(batch, use_bin_type=True).hex() + "\n")
with open("vllm_array_batch.golden.hex", "w") as f:
    batch = [1700000000.25, [list(e.values()) for e in events], 1]
    f.write(msgpack.packb(batch, use_bin_type=True).hex() + "\n")
