#!/usr/bin/env python3
"""Writes the KV-event golden batches of runtime/state/kv, one hex file per encoding.

The batches are built by hand as the engines' msgspec encoders lay them out and packed
with the msgpack package (Debian: python3-msgpack), independently of the Go decoder under
test. Run from this directory:

    /usr/bin/python3 kv_golden.py

Encodings (vllm = vllm/distributed/kv_events.py, sglang = python/sglang/srt/disaggregation/kv_events.py):
- sglang_batch.hex: SGLang, array_like=True, tag=True, omit_defaults=True: positional
  batch [ts, events, dp_rank], positional events led by the class name, one page each.
- vllm_array_batch.hex: vLLM before PR #42892, the same positional layout with vLLM's
  longer BlockStored (lora_name, extra_keys, group_idx, kv_cache_spec_kind, ...), several
  blocks per store and unsigned 64-bit hashes.
- vllm_map_batch.hex: vLLM 0.26 as captured in volcano-sh/kthena#1535: positional batch,
  events as maps tagged by "type", an event type the router does not know.
- vllm_struct_batch.hex: current vLLM, whose EventBatch has no array_like either: the
  batch itself is a map {ts, events, data_parallel_rank}.

The hashes of the vLLM batches are arbitrary 64-bit values, as vLLM's seeded hashes look
to the router; SGLang's are its page hashes of [1, 2, 3, 4] and [5, 6, 7, 8].
"""
import msgpack

H1, H2 = -3488128144981237669, 5674439469042975057  # SGLang's hashes
V1, V2 = 15760518052499183552, 4200000000000000001  # vLLM-style hashes


def write(name, batch):
    with open(name, "w") as f:
        f.write(msgpack.packb(batch, use_bin_type=True).hex() + "\n")


write("sglang_batch.hex", [
    1700000000.25,
    [
        ["BlockStored", [H1], None, [1, 2, 3, 4], 4, None, "GPU"],
        ["BlockStored", [H2], H1, [5, 6, 7, 8], 4, None, "GPU"],
        ["BlockRemoved", [H2], "GPU"],
        ["AllBlocksCleared"],
    ],
    1,
])

write("vllm_array_batch.hex", [
    1789095808.83,
    [
        ["BlockStored", [V1, V2], None, [1, 2, 3, 4, 5, 6, 7, 8], 4, None, "GPU", None, [None, None], 0, "full_attention"],
        ["BlockRemoved", [V2], "GPU", 0],
        ["AllBlocksCleared"],
    ],
    0,
])

# Keys sorted as in the captured batch.
write("vllm_map_batch.hex", [
    1789095808.83,
    [
        {"block_hashes": [14958615928728313947], "block_size": 4, "extra_keys": None, "group_idx": 0,
         "kv_cache_spec_kind": "full_attention", "lora_id": None, "lora_name": None, "medium": "GPU",
         "parent_block_hash": None, "token_ids": [1, 2, 3, 4], "type": "BlockStored"},
        {"block_hashes": [5674439469042975057], "block_size": 4, "medium": "CPU_PINNED",
         "parent_block_hash": 14958615928728313947, "token_ids": [5, 6, 7, 8], "type": "BlockStored"},
        {"block_hashes": [5674439469042975057], "group_idx": 0, "medium": "GPU", "type": "BlockRemoved"},
        {"type": "SomethingNew", "x": 1},
        {"type": "AllBlocksCleared"},
    ],
    0,
])

# msgspec writes the tag first, then the fields in declaration order, defaults omitted.
write("vllm_struct_batch.hex", {
    "ts": 1789095808.83,
    "events": [
        {"type": "BlockStored", "block_hashes": [V1], "parent_block_hash": None, "token_ids": [1, 2, 3, 4],
         "block_size": 4, "lora_id": None, "medium": "GPU", "lora_name": None, "extra_keys": [None],
         "group_idx": 0, "kv_cache_spec_kind": "full_attention"},
        {"type": "BlockStored", "block_hashes": [V2], "parent_block_hash": V1, "token_ids": [5, 6, 7, 8],
         "block_size": 4, "lora_id": None, "medium": "GPU", "lora_name": "adapter-a", "extra_keys": [["adapter-a"]],
         "group_idx": 0, "kv_cache_spec_kind": "full_attention"},
        {"type": "BlockRemoved", "block_hashes": [V1], "medium": "GPU", "group_idx": 0},
        {"type": "AllBlocksCleared"},
    ],
    "data_parallel_rank": 2,
})
